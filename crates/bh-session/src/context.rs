//! The message list Pi would send for a leaf ([P16] `buildSessionProjection`;
//! identical to [P73] `buildSessionContext` on files without 1.x entries).

use std::collections::HashMap;

use bh_protocol::message::{BranchSummaryMessage, CompactionSummaryMessage, CustomContextMessage};
use bh_protocol::{EntryType, RawObject};
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::{Result, SessionError};
use crate::session::{Entry, Session};

/// One message of the context, with the entry it came from.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextMessage {
    pub entry_id: String,
    /// The AgentMessage exactly as Pi builds it (stored messages keep their
    /// source bytes; summaries and custom messages are synthesised).
    pub message: Box<RawValue>,
}

impl ContextMessage {
    /// The message's `role`.
    pub fn role(&self) -> Option<String> {
        RawObject::parse(self.message.get())
            .ok()
            .and_then(|o| o.get_as::<String>("role"))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelRef {
    pub provider: Option<String>,
    pub model_id: Option<String>,
}

/// The system prompt and tools after replaying 1.x `system` messages in order
/// (`sections` patch by name, `null` deletes; `toolsAdded`/`toolsRemoved`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemPrompt {
    /// The last non-empty `content`, if any system message had one.
    pub content: Option<String>,
    /// Sections in first-set order.
    pub sections: Vec<(String, String)>,
    /// Tool names currently declared.
    pub tools: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Context {
    pub leaf: Option<String>,
    pub thinking_level: String,
    pub model: Option<ModelRef>,
    pub messages: Vec<ContextMessage>,
    /// Present when the context contains 1.x `system` messages.
    pub system: Option<SystemPrompt>,
}

/// `new Date(iso).getTime()`; `None` (JSON `null`, like `NaN`) when unparsable.
pub fn iso_to_ms(ts: Option<&str>) -> Option<i64> {
    let ts = ts?;
    ts.parse::<jiff::Timestamp>()
        .ok()
        .map(|t| t.as_millisecond())
}

fn truthy(v: Option<&RawValue>) -> bool {
    match v.map(|v| v.get().trim()) {
        None => false,
        Some("null" | "false" | "0" | "\"\"" | "-0") => false,
        Some(_) => true,
    }
}

impl Session {
    /// The context for `leaf` (default: the active leaf).
    pub fn context(&self, leaf: Option<&str>) -> Result<Context> {
        let leaf_id = match leaf {
            Some(id) => Some(self.require(id)?.id.clone()),
            None => self.leaf().map(|e| e.id.clone()),
        };
        let path: Vec<&Entry> = match &leaf_id {
            Some(id) => self.path_to_root(id)?,
            None => Vec::new(),
        };

        let mut thinking_level = "off".to_owned();
        let mut model = None;
        for e in &path {
            match e.kind {
                EntryType::ThinkingLevelChange => {
                    thinking_level = e.thinking_level.clone().unwrap_or_default();
                }
                EntryType::ModelChange => {
                    model = Some(ModelRef {
                        provider: e.provider.clone(),
                        model_id: e.model.clone(),
                    })
                }
                EntryType::Message if e.role.as_deref() == Some("assistant") => {
                    model = Some(ModelRef {
                        provider: e.provider.clone(),
                        model_id: e.model.clone(),
                    })
                }
                _ => {}
            }
        }

        // buildContextEntries
        let compaction_ix = path.iter().rposition(|e| e.kind == EntryType::Compaction);
        let context_entries: Vec<&Entry> = match compaction_ix {
            None => path.clone(),
            Some(cix) => {
                let comp = path[cix];
                let mut out = vec![comp];
                let mut found = false;
                for e in &path[..cix] {
                    if comp.first_kept_entry_id.as_deref() == Some(e.id.as_str()) {
                        found = true;
                    }
                    let is_system =
                        e.kind == EntryType::Message && e.role.as_deref() == Some("system");
                    if found && !is_system {
                        out.push(e);
                    }
                }
                out.extend(path[cix + 1..].iter().copied());
                out
            }
        };

        let mut edits: HashMap<&str, &Entry> = HashMap::new();
        for e in &context_entries {
            if e.kind == EntryType::ContextEdit
                && let Some(t) = &e.target_id
            {
                edits.insert(t.as_str(), e);
            }
        }

        let mut messages = Vec::new();
        for (i, e) in context_entries.iter().enumerate() {
            if e.kind == EntryType::Compaction && i > 0 {
                continue;
            }
            let projected = self.entry_messages(e)?;
            if projected.is_empty() {
                continue;
            }
            match edits.get(e.id.as_str()) {
                None => messages.extend(projected.into_iter().map(|m| ContextMessage {
                    entry_id: e.id.clone(),
                    message: m,
                })),
                Some(edit) => {
                    let edit_obj = self.entry_object(edit)?;
                    let replacement = edit_obj.get("replacement");
                    let replacement = match replacement {
                        None => None,
                        Some(r) if r.get().trim() == "null" => None,
                        Some(r) => Some(RawObject::parse(r.get()).unwrap_or_default()),
                    };
                    let Some(replacement) = replacement else {
                        continue; // omitted from context
                    };
                    for m in projected {
                        let msg = self.apply_edit(e, m, &replacement)?;
                        messages.push(ContextMessage {
                            entry_id: e.id.clone(),
                            message: msg,
                        });
                    }
                }
            }
        }

        let system = system_prompt(&messages);
        Ok(Context {
            leaf: leaf_id,
            thinking_level,
            model,
            messages,
            system,
        })
    }

    fn encode_err(&self, e: &Entry, source: serde_json::Error) -> SessionError {
        SessionError::Encode {
            file: self.display_name(),
            line: e.line,
            source,
        }
    }

    /// `sessionEntryToContextMessages` for one entry.
    fn entry_messages(&self, e: &Entry) -> Result<Vec<Box<RawValue>>> {
        let enc = |source| self.encode_err(e, source);
        match e.kind {
            EntryType::Message => {
                let obj = self.entry_object(e)?;
                let Some(raw) = obj.get("message") else {
                    return Ok(Vec::new());
                };
                let role = e.role.as_deref();
                let needs_fix =
                    matches!(role, Some("system" | "user" | "assistant" | "toolResult"));
                if needs_fix {
                    let mut msg = RawObject::parse(raw.get()).map_err(enc)?;
                    let missing = msg.get("content").is_none_or(|c| c.get().trim() == "null");
                    if missing {
                        if role == Some("system") {
                            msg.set("content", "").map_err(enc)?;
                        } else {
                            msg.set("content", &Vec::<Value>::new()).map_err(enc)?;
                        }
                        return Ok(vec![msg.to_raw_value().map_err(enc)?]);
                    }
                }
                Ok(vec![raw.to_owned()])
            }
            EntryType::CustomMessage => {
                let obj = self.entry_object(e)?;
                let empty = RawValue::from_string("[]".to_owned()).map_err(enc)?;
                let content = match obj.get("content") {
                    Some(c) if c.get().trim() != "null" => c,
                    _ => empty.as_ref(),
                };
                let m = CustomContextMessage {
                    role: "custom",
                    custom_type: obj.get("customType"),
                    content: Some(content),
                    display: obj.get("display"),
                    details: obj.get("details"),
                    timestamp: iso_to_ms(e.timestamp.as_deref()),
                };
                Ok(vec![serde_json::value::to_raw_value(&m).map_err(enc)?])
            }
            EntryType::BranchSummary => {
                let obj = self.entry_object(e)?;
                if !truthy(obj.get("summary")) {
                    return Ok(Vec::new());
                }
                let m = BranchSummaryMessage {
                    role: "branchSummary",
                    summary: obj.get("summary"),
                    from_id: obj.get("fromId"),
                    timestamp: iso_to_ms(e.timestamp.as_deref()),
                };
                Ok(vec![serde_json::value::to_raw_value(&m).map_err(enc)?])
            }
            EntryType::Compaction => {
                let obj = self.entry_object(e)?;
                let m = CompactionSummaryMessage {
                    role: "compactionSummary",
                    summary: obj.get("summary"),
                    tokens_before: obj.get("tokensBefore"),
                    timestamp: iso_to_ms(e.timestamp.as_deref()),
                };
                let summary = serde_json::value::to_raw_value(&m).map_err(enc)?;
                match obj.get("systemMessage") {
                    Some(sm) if truthy(Some(sm)) => Ok(vec![sm.to_owned(), summary]),
                    _ => Ok(vec![summary]),
                }
            }
            _ => Ok(Vec::new()),
        }
    }

    /// `projectContextEntry` with a non-null replacement.
    fn apply_edit(
        &self,
        e: &Entry,
        message: Box<RawValue>,
        replacement: &RawObject,
    ) -> Result<Box<RawValue>> {
        let enc = |source| self.encode_err(e, source);
        let mut msg = RawObject::parse(message.get()).map_err(enc)?;
        let role = msg.get_as::<String>("role");
        if !matches!(
            role.as_deref(),
            Some("user" | "assistant" | "toolResult" | "custom")
        ) {
            return Ok(message);
        }
        match replacement.get("content") {
            None => {
                msg.remove("content");
            }
            Some(c) => {
                let as_string = serde_json::from_str::<String>(c.get()).ok();
                match (role.as_deref(), as_string) {
                    (Some("assistant" | "toolResult"), Some(text)) => {
                        let block = serde_json::json!([{"type": "text", "text": text}]);
                        msg.set("content", &block).map_err(enc)?;
                    }
                    _ => msg.set_raw("content", c.to_owned()),
                }
            }
        }
        msg.to_raw_value().map_err(enc)
    }
}

fn system_prompt(messages: &[ContextMessage]) -> Option<SystemPrompt> {
    let mut out: Option<SystemPrompt> = None;
    for m in messages {
        let Ok(v) = serde_json::from_str::<Value>(m.message.get()) else {
            continue;
        };
        if v.get("role").and_then(Value::as_str) != Some("system") {
            continue;
        }
        let sp = out.get_or_insert_with(SystemPrompt::default);
        if let Some(c) = v.get("content").and_then(Value::as_str)
            && !c.is_empty()
        {
            sp.content = Some(c.to_owned());
        }
        // Section order: keep the order of the raw object, not the BTreeMap.
        if let Some(raw) = RawObject::parse(m.message.get())
            .ok()
            .and_then(|o| o.get("sections").map(RawValue::to_owned))
            && let Ok(sections) = RawObject::parse(raw.get())
        {
            for (name, val) in sections.iter() {
                match serde_json::from_str::<Option<String>>(val.get()) {
                    Ok(Some(text)) => {
                        if let Some(s) = sp.sections.iter_mut().find(|(n, _)| n == name) {
                            s.1 = text;
                        } else {
                            sp.sections.push((name.to_owned(), text));
                        }
                    }
                    Ok(None) => sp.sections.retain(|(n, _)| n != name),
                    Err(_) => {}
                }
            }
        }
        for t in v
            .get("toolsRemoved")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(name) = t.get("name").and_then(Value::as_str) {
                sp.tools.retain(|n| n != name);
            }
        }
        for t in v
            .get("toolsAdded")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(name) = t.get("name").and_then(Value::as_str)
                && !sp.tools.iter().any(|n| n == name)
            {
                sp.tools.push(name.to_owned());
            }
        }
    }
    out
}
