//! The `messages` array of a Chat Completions request (Pi's `convertMessages`),
//! one step per message kind: the system prompt, a user message, an assistant
//! message, and a run of tool results (with the images they carried).

use bh_protocol::message::{AssistantMessage, Content, KnownBlock, ToolResultMessage, UserMessage};
use serde_json::{Map, Value, json};

use crate::convert::{normalize_id_openai, transform_borrowed};
use crate::quirks::Quirks;
use crate::types::{ChatRequest, Message, ModelSpec, block_extra_str, known};

/// Fields a compatible server reads the assistant's reasoning back from.
pub(super) const REASONING_FIELDS: [&str; 3] = ["reasoning_content", "reasoning", "reasoning_text"];

/// The text some servers need between a tool result and the next user turn.
const PROCESSED: &str = "I have processed the tool results.";

/// [`super::convert_messages`] one message at a time, so that the request body
/// can be written without holding the whole array as JSON values.
pub(super) fn each_message(model: &ModelSpec, req: &ChatRequest, emit: &mut dyn FnMut(Value)) {
    let q = &model.quirks;
    let provider = model.provider.clone();
    let normalize = move |id: &str| normalize_id_openai(id, &provider);
    let messages = transform_borrowed(&req.messages, model, &normalize);
    if let Some(sp) = &req.system_prompt {
        emit(system(model, sp));
    }
    let mut last_was_tool = false;
    let mut i = 0;
    while i < messages.len() {
        match &*messages[i] {
            Message::User(u) => {
                if q.requires_assistant_after_tool_result && last_was_tool {
                    emit(json!({"role": "assistant", "content": PROCESSED}));
                }
                if let Some(m) = user(u) {
                    emit(m);
                }
                last_was_tool = false;
                i += 1;
            }
            Message::Assistant(a) => {
                if let Some(m) = assistant(q, a) {
                    emit(m);
                    last_was_tool = false;
                }
                i += 1;
            }
            Message::ToolResult(_) => {
                let run: Vec<&ToolResultMessage> = messages[i..]
                    .iter()
                    .map_while(|m| match &**m {
                        Message::ToolResult(r) => Some(r),
                        _ => None,
                    })
                    .collect();
                i += run.len();
                last_was_tool = tool_results(model, &run, emit);
            }
        }
    }
}

/// The system prompt: `developer` for a reasoning model that takes that role.
fn system(model: &ModelSpec, prompt: &str) -> Value {
    let role = if model.reasoning && model.quirks.supports_developer_role {
        "developer"
    } else {
        "system"
    };
    json!({"role": role, "content": prompt})
}

/// A user message; `None` when it has blocks but no text or image among them.
fn user(u: &UserMessage) -> Option<Value> {
    match &u.content {
        Content::Text(s) => Some(json!({"role": "user", "content": s})),
        Content::Blocks(blocks) => {
            let parts: Vec<Value> = blocks
                .iter()
                .filter_map(|b| match known(b) {
                    Some(KnownBlock::Text { text, .. }) => {
                        Some(json!({"type": "text", "text": text}))
                    }
                    Some(KnownBlock::Image {
                        data, mime_type, ..
                    }) => Some(image_part(mime_type, data)),
                    _ => None,
                })
                .collect();
            (!parts.is_empty()).then(|| json!({"role": "user", "content": parts}))
        }
    }
}

/// An assistant message: text, thinking (as text or in the reasoning field its
/// signature names) and tool calls; `None` when nothing of it is left to send.
fn assistant(q: &Quirks, a: &AssistantMessage) -> Option<Value> {
    let mut msg = Map::new();
    msg.insert("role".into(), json!("assistant"));
    msg.insert("content".into(), Value::Null);
    let texts: Vec<&str> = a
        .content
        .iter()
        .filter_map(|b| match known(b) {
            Some(KnownBlock::Text { text, .. }) if !text.trim().is_empty() => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let thinking: Vec<(&str, Option<&str>)> = a
        .content
        .iter()
        .filter_map(|b| match known(b) {
            Some(KnownBlock::Thinking { thinking, extra }) if !thinking.trim().is_empty() => {
                Some((
                    thinking.as_str(),
                    block_extra_str(extra, "thinkingSignature"),
                ))
            }
            _ => None,
        })
        .collect();
    if !thinking.is_empty() && q.requires_thinking_as_text {
        let joined = thinking
            .iter()
            .map(|t| t.0)
            .collect::<Vec<_>>()
            .join("\n\n");
        let mut parts = vec![json!({"type": "text", "text": joined})];
        parts.extend(texts.iter().map(|t| json!({"type": "text", "text": t})));
        msg.insert("content".into(), Value::Array(parts));
    } else {
        let text = texts.concat();
        if !text.is_empty() {
            msg.insert("content".into(), Value::String(text));
        }
        if let Some((_, Some(sig))) = thinking.first()
            && REASONING_FIELDS.contains(sig)
        {
            let joined = thinking.iter().map(|t| t.0).collect::<Vec<_>>().join("\n");
            msg.insert((*sig).to_owned(), Value::String(joined));
        }
    }
    let calls = tool_calls(a);
    let has_calls = !calls.is_empty();
    if has_calls {
        msg.insert("tool_calls".into(), Value::Array(calls));
    }
    let has_content = match msg.get("content") {
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        _ => false,
    };
    (has_content || has_calls).then_some(Value::Object(msg))
}

/// The assistant's tool calls in the wire's `function` shape.
fn tool_calls(a: &AssistantMessage) -> Vec<Value> {
    a.content
        .iter()
        .filter_map(|b| match known(b) {
            Some(KnownBlock::ToolCall {
                id,
                name,
                arguments,
                ..
            }) => Some(json!({"id": id, "type": "function", "function": {
                "name": name, "arguments": arguments.to_string()}})),
            _ => None,
        })
        .collect()
}

/// A run of consecutive tool results: one `tool` message each, then the images
/// they carried as one user message (the wire's tool role takes no images).
/// Returns whether the run ends on a tool message (no image message after it).
fn tool_results(
    model: &ModelSpec,
    run: &[&ToolResultMessage],
    emit: &mut dyn FnMut(Value),
) -> bool {
    let q = &model.quirks;
    let mut images = Vec::new();
    for r in run {
        emit(tool_message(q, r));
        if model.input_images {
            images.extend(r.content.iter().filter_map(|b| match known(b) {
                Some(KnownBlock::Image {
                    data, mime_type, ..
                }) => Some(image_part(mime_type, data)),
                _ => None,
            }));
        }
    }
    if images.is_empty() {
        return true;
    }
    if q.requires_assistant_after_tool_result {
        emit(json!({"role": "assistant", "content": PROCESSED}));
    }
    let mut parts = vec![json!({"type": "text", "text": "Attached image(s) from tool result:"})];
    parts.extend(images);
    emit(json!({"role": "user", "content": parts}));
    false
}

/// One tool result as a `tool` message (its text; a stand-in when it has none).
fn tool_message(q: &Quirks, r: &ToolResultMessage) -> Value {
    let text = r
        .content
        .iter()
        .filter_map(|b| match known(b) {
            Some(KnownBlock::Text { text, .. }) => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let content = if text.is_empty() {
        "(see attached image)".to_owned()
    } else {
        text
    };
    let mut m = json!({"role": "tool", "content": content, "tool_call_id": r.tool_call_id});
    if q.requires_tool_result_name
        && let Some(o) = m.as_object_mut()
    {
        o.insert("name".into(), json!(r.tool_name));
    }
    m
}

/// An image as a `data:` URL part.
fn image_part(mime_type: &str, data: &str) -> Value {
    json!({"type": "image_url", "image_url": {"url": format!("data:{mime_type};base64,{data}")}})
}
