//! Agent messages stored in `message` entries (`message.role`), and the
//! messages Pi synthesises for its context ([P73] `dist/core/messages.js`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Content blocks ([AI73] `dist/types.d.ts`). Unknown block types are kept as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ContentBlock {
    Known(KnownBlock),
    Unknown(Value),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum KnownBlock {
    Text {
        text: String,
        #[serde(flatten)]
        extra: BTreeMap<String, Value>,
    },
    Thinking {
        thinking: String,
        #[serde(flatten)]
        extra: BTreeMap<String, Value>,
    },
    ToolCall {
        id: String,
        name: String,
        #[serde(default)]
        arguments: Value,
        #[serde(flatten)]
        extra: BTreeMap<String, Value>,
    },
    Image {
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
        #[serde(flatten)]
        extra: BTreeMap<String, Value>,
    },
}

impl ContentBlock {
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Known(KnownBlock::Text {
            text: text.into(),
            extra: BTreeMap::new(),
        })
    }
}

/// `content` is a string or an array of blocks (user messages, custom messages).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Blocks(Vec<ContentBlock>),
}

impl Content {
    /// The text blocks joined with a space, as Pi's session list does.
    pub fn plain_text(&self) -> String {
        match self {
            Content::Text(s) => s.clone(),
            Content::Blocks(blocks) => blocks
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Known(KnownBlock::Text { text, .. }) => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// Serialise a number the way JavaScript's `JSON.stringify` does: integral
/// values without a fraction (`0`, not `0.0`).
pub fn js_number<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    const MAX_SAFE: f64 = 9_007_199_254_740_991.0;
    if v.is_finite() && v.fract() == 0.0 && v.abs() <= MAX_SAFE {
        s.serialize_i64(*v as i64)
    } else if v.is_finite() {
        s.serialize_f64(*v)
    } else {
        s.serialize_unit()
    }
}

/// Costs in USD, as Pi stores them (`JSON.stringify` number formatting): the
/// five sums, then the other keys in name order, `totalFromProvider` among them.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    #[serde(default)]
    pub input: f64,
    #[serde(default)]
    pub output: f64,
    #[serde(default)]
    pub cache_read: f64,
    #[serde(default)]
    pub cache_write: f64,
    #[serde(default)]
    pub total: f64,
    /// Pi 1.6's `totalFromProvider` (a field, not an `extra` entry: every
    /// message has it, and a one-entry map costs a B-tree node per message).
    #[serde(default, deserialize_with = "present")]
    pub total_from_provider: Option<Value>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// A number serialised by [`js_number`].
struct Js(f64);

impl Serialize for Js {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        js_number(&self.0, s)
    }
}

impl Serialize for Cost {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("input", &Js(self.input))?;
        m.serialize_entry("output", &Js(self.output))?;
        m.serialize_entry("cacheRead", &Js(self.cache_read))?;
        m.serialize_entry("cacheWrite", &Js(self.cache_write))?;
        m.serialize_entry("total", &Js(self.total))?;
        serialize_merged(
            &mut m,
            &self.extra,
            &[("totalFromProvider", &self.total_from_provider)],
        )?;
        m.end()
    }
}

/// `extra`'s keys in name order with `fields` (sorted by name, skipped when
/// `None`) each in its place: what a map of them all would serialise as.
fn serialize_merged<M: serde::ser::SerializeMap>(
    m: &mut M,
    extra: &BTreeMap<String, Value>,
    fields: &[(&str, &Option<Value>)],
) -> Result<(), M::Error> {
    let mut rest = extra.iter().map(|(k, v)| (k.as_str(), v)).peekable();
    for &(k, v) in fields {
        while let Some((ek, ev)) = rest.next_if(|(ek, _)| *ek < k) {
            m.serialize_entry(ek, ev)?;
        }
        if let Some(v) = v {
            m.serialize_entry(k, v)?;
        }
    }
    for (ek, ev) in rest {
        m.serialize_entry(ek, ev)?;
    }
    Ok(())
}

/// Token usage. Serialised in Pi's key order: the OpenAI-style wires (Pi 1.6's
/// `parseChunkUsage`) put `reasoning` before `totalTokens`; Anthropic adds `cacheWrite1h`
/// and `reasoning` after `cost`, so `reasoning` goes there when `cacheWrite1h` is present.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    #[serde(default)]
    pub input: u64,
    #[serde(default)]
    pub output: u64,
    #[serde(default)]
    pub cache_read: u64,
    #[serde(default)]
    pub cache_write: u64,
    #[serde(default)]
    pub total_tokens: u64,
    #[serde(default)]
    pub cost: Cost,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// `{"role":"user","content":…,"timestamp":<ms>}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserMessage {
    pub role: String,
    pub content: Content,
    pub timestamp: i64,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl UserMessage {
    pub fn new(content: Content, timestamp_ms: i64) -> Self {
        UserMessage {
            role: "user".into(),
            content,
            timestamp: timestamp_ms,
            extra: BTreeMap::new(),
        }
    }
}

/// An assistant turn, in the key order Pi writes: after `timestamp` come `responseId`,
/// `responseModel`, `rawStopReason` (Pi 1.6, set while streaming), then `errorMessage`, then
/// the other keys in name order, among them `durationMs` and `thinkingLevel` (set by Pi 1.6's
/// loop when the response ends). The keys Pi 1.6 writes are fields, so that a message holds
/// no map (a B-tree node each) unless it carries a key this version does not know.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    pub role: String,
    pub content: Vec<ContentBlock>,
    pub api: String,
    pub provider: String,
    pub model: String,
    pub usage: Usage,
    pub stop_reason: String,
    pub timestamp: i64,
    #[serde(default, deserialize_with = "present")]
    pub response_id: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub response_model: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub raw_stop_reason: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// How long the response took, in whole milliseconds (Pi 1.6).
    #[serde(default, deserialize_with = "present")]
    pub duration_ms: Option<Value>,
    /// The thinking level the response was asked with (Pi 1.6).
    #[serde(default, deserialize_with = "present")]
    pub thinking_level: Option<Value>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// A key that is present keeps its value, `null` included (a missing key is `None`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl Serialize for AssistantMessage {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("role", &self.role)?;
        m.serialize_entry("content", &self.content)?;
        m.serialize_entry("api", &self.api)?;
        m.serialize_entry("provider", &self.provider)?;
        m.serialize_entry("model", &self.model)?;
        m.serialize_entry("usage", &self.usage)?;
        m.serialize_entry("stopReason", &self.stop_reason)?;
        m.serialize_entry("timestamp", &self.timestamp)?;
        let streamed = [
            ("responseId", &self.response_id),
            ("responseModel", &self.response_model),
            ("rawStopReason", &self.raw_stop_reason),
        ];
        for (k, v) in streamed {
            if let Some(v) = v {
                m.serialize_entry(k, v)?;
            }
        }
        if let Some(e) = &self.error_message {
            m.serialize_entry("errorMessage", e)?;
        }
        // The other keys in name order, `durationMs` and `thinkingLevel` in their places.
        serialize_merged(
            &mut m,
            &self.extra,
            &[
                ("durationMs", &self.duration_ms),
                ("thinkingLevel", &self.thinking_level),
            ],
        )?;
        m.end()
    }
}

impl Serialize for Usage {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let fixed = [
            "input",
            "output",
            "cacheRead",
            "cacheWrite",
            "totalTokens",
            "cost",
        ];
        let early_reasoning = !self.extra.contains_key("cacheWrite1h");
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("input", &self.input)?;
        m.serialize_entry("output", &self.output)?;
        m.serialize_entry("cacheRead", &self.cache_read)?;
        m.serialize_entry("cacheWrite", &self.cache_write)?;
        if early_reasoning && let Some(r) = self.extra.get("reasoning") {
            m.serialize_entry("reasoning", r)?;
        }
        m.serialize_entry("totalTokens", &self.total_tokens)?;
        m.serialize_entry("cost", &self.cost)?;
        for (k, v) in &self.extra {
            if fixed.contains(&k.as_str()) || (early_reasoning && k == "reasoning") {
                continue;
            }
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// A tool result, in the key order Pi writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultMessage {
    pub role: String,
    pub tool_call_id: String,
    pub tool_name: String,
    pub content: Vec<ContentBlock>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    pub is_error: bool,
    pub timestamp: i64,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// `compactionSummary`, built at load time from a `compaction` entry.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionSummaryMessage<'a> {
    pub role: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<&'a serde_json::value::RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_before: Option<&'a serde_json::value::RawValue>,
    pub timestamp: Option<i64>,
}

/// `branchSummary`, built at load time from a `branch_summary` entry.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BranchSummaryMessage<'a> {
    pub role: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<&'a serde_json::value::RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_id: Option<&'a serde_json::value::RawValue>,
    pub timestamp: Option<i64>,
}

/// `custom`, built at load time from a `custom_message` entry (sent as user content).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomContextMessage<'a> {
    pub role: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_type: Option<&'a serde_json::value::RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<&'a serde_json::value::RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display: Option<&'a serde_json::value::RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<&'a serde_json::value::RawValue>,
    pub timestamp: Option<i64>,
}

/// Roles Pi knows (0.73.1 and 1.x). Anything else is kept and passed through.
pub const KNOWN_ROLES: &[&str] = &[
    "user",
    "assistant",
    "toolResult",
    "bashExecution",
    "custom",
    "system",
    "branchSummary",
    "compactionSummary",
    "hookMessage",
];

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn new_pi_fields_serialise_in_pis_key_order() {
        // Pi 1.6 lines (OpenAI-compatible and Anthropic), key order as Pi wrote them.
        let openai = r#"{"role":"assistant","content":[],"api":"openai-completions","provider":"p","model":"m","usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"reasoning":1,"totalTokens":3,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"error","timestamp":5,"responseId":"c","responseModel":"m2","rawStopReason":"content_filter","errorMessage":"Provider finish_reason: content_filter"}"#;
        let anthropic = r#"{"role":"assistant","content":[],"api":"anthropic-messages","provider":"a","model":"m","usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0},"cacheWrite1h":0,"reasoning":2},"stopReason":"stop","timestamp":5,"responseId":"msg","rawStopReason":"end_turn","thinkingLevel":"off"}"#;
        // Printed by Pi 1.6.0 for an Anthropic stream cut after its first events.
        let cut = r#"{"role":"assistant","content":[{"type":"text","text":""}],"api":"anthropic-messages","provider":"replay","model":"claude-sonnet-4-5","usage":{"input":12,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":13,"cost":{"input":0.000036,"output":0.000015,"cacheRead":0,"cacheWrite":0,"total":0.000051,"totalFromProvider":false},"cacheWrite1h":0},"stopReason":"error","timestamp":1796110216198,"responseId":"msg_01QC4g3HwBThD4BaNtBckFDJ","responseModel":"claude-sonnet-4-5-20250929","errorMessage":"Anthropic stream ended before message_stop","durationMs":112,"thinkingLevel":"off"}"#;
        for line in [openai, anthropic, cut] {
            let m: AssistantMessage = serde_json::from_str(line).unwrap();
            assert_eq!(serde_json::to_string(&m).unwrap(), line);
        }
        // Pi 1.6's keys are fields: a message with none of the unknown ones holds no map.
        let m: AssistantMessage = serde_json::from_str(cut).unwrap();
        assert!(m.extra.is_empty() && m.usage.cost.extra.is_empty(), "{m:?}");
        assert_eq!(m.usage.cost.total_from_provider, Some(Value::Bool(false)));
        // Unknown keys keep their name order around durationMs and thinkingLevel.
        let odd = cut.replace(
            r#""durationMs":112,"thinkingLevel":"off"}"#,
            r#""aFirst":1,"durationMs":112,"newKey":[2],"thinkingLevel":"off","zLast":null}"#,
        );
        let m: AssistantMessage = serde_json::from_str(&odd).unwrap();
        assert_eq!(m.extra.len(), 3);
        assert_eq!(serde_json::to_string(&m).unwrap(), odd);
        // Unknown cost keys keep their name order around totalFromProvider.
        let costs = odd.replace(
            r#""total":0.000051,"totalFromProvider":false}"#,
            r#""total":0.000051,"reasoning":1,"totalFromProvider":false,"zeta":2}"#,
        );
        let m: AssistantMessage = serde_json::from_str(&costs).unwrap();
        assert_eq!(m.usage.cost.extra.len(), 2);
        assert_eq!(serde_json::to_string(&m).unwrap(), costs);
        // A key present as null stays (a missing one stays missing).
        let nulls = odd
            .replace(r#""claude-sonnet-4-5-20250929""#, "null")
            .replace(
                r#""totalFromProvider":false"#,
                r#""totalFromProvider":null"#,
            );
        let m: AssistantMessage = serde_json::from_str(&nulls).unwrap();
        assert_eq!(m.response_model, Some(Value::Null));
        assert_eq!(serde_json::to_string(&m).unwrap(), nulls);
    }

    #[test]
    fn costs_serialise_like_javascript() {
        let c = Cost {
            input: 0.0,
            output: 0.00045,
            cache_read: 3.0,
            cache_write: 1e300,
            total: f64::NAN,
            total_from_provider: None,
            extra: BTreeMap::new(),
        };
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"input":0,"output":0.00045,"cacheRead":3,"cacheWrite":1e+300,"total":null}"#
        );
    }
}
