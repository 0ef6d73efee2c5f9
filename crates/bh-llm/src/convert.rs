//! Provider-neutral history preparation: Pi's `transformMessages`
//! (pi-ai 0.73.1 `dist/providers/transform-messages.js`).
//!
//! * images are replaced by a placeholder for models without image input;
//! * thinking from another model becomes text (empty thinking is dropped, redacted
//!   thinking is dropped); same-model thinking is kept with its signature;
//! * tool-call ids of other models are normalised by the wire's rule and the matching
//!   tool results are renamed with them;
//! * assistant messages that ended in `error` / `aborted` are skipped;
//! * every tool call gets a result: a missing one becomes a synthetic
//!   `"No result provided"` error result, inserted before the next assistant or user
//!   message; results whose call is not in the preceding assistant message are dropped.

use std::collections::{BTreeMap, HashMap, HashSet};

use bh_protocol::message::{Content, ContentBlock, KnownBlock, ToolResultMessage};

use crate::turn::now_ms;
use crate::types::{Message, ModelSpec, block_extra_str, is_redacted, known};

const NON_VISION_USER_IMAGE_PLACEHOLDER: &str = "(image omitted: model does not support images)";
const NON_VISION_TOOL_IMAGE_PLACEHOLDER: &str =
    "(tool image omitted: model does not support images)";

fn replace_images(content: &[ContentBlock], placeholder: &str) -> Vec<ContentBlock> {
    let mut out = Vec::new();
    let mut previous_was_placeholder = false;
    for b in content {
        if matches!(known(b), Some(KnownBlock::Image { .. })) {
            if !previous_was_placeholder {
                out.push(ContentBlock::text(placeholder));
            }
            previous_was_placeholder = true;
            continue;
        }
        previous_was_placeholder =
            matches!(known(b), Some(KnownBlock::Text { text, .. }) if text == placeholder);
        out.push(b.clone());
    }
    out
}

/// Anthropic's rule: `^[a-zA-Z0-9_-]+$`, at most 64 characters.
pub fn normalize_id_anthropic(id: &str) -> String {
    let s: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if s.is_empty() { "call_".to_owned() } else { s }
}

/// OpenAI's rule as Pi applies it: `call|item` ids keep the call part, sanitised to 40
/// characters; the `openai` provider truncates any id to 40 characters; an empty id
/// (a server that sent none) gets a placeholder.
pub fn normalize_id_openai(id: &str, provider: &str) -> String {
    if let Some((call, _)) = id.split_once('|') {
        return normalize_id_anthropic(call).chars().take(40).collect();
    }
    if id.is_empty() {
        return "call_".to_owned();
    }
    if provider == "openai" {
        return id.chars().take(40).collect();
    }
    id.to_owned()
}

/// Prepare `messages` for `model`; `normalize` maps tool-call ids of other models.
pub fn transform_messages(
    messages: &[Message],
    model: &ModelSpec,
    normalize: &dyn Fn(&str) -> String,
) -> Vec<Message> {
    transform_borrowed(messages, model, normalize)
        .into_iter()
        .map(Msg::into_owned)
        .collect()
}

fn has_images(content: &[ContentBlock]) -> bool {
    content
        .iter()
        .any(|b| matches!(known(b), Some(KnownBlock::Image { .. })))
}

/// Whether the first pass would leave a same-model assistant message as it is.
fn same_model_unchanged(a: &bh_protocol::message::AssistantMessage) -> bool {
    a.content.iter().all(|b| match b {
        ContentBlock::Known(KnownBlock::Thinking { thinking, extra }) => {
            is_redacted(extra)
                || block_extra_str(extra, "thinkingSignature").is_some_and(|s| !s.is_empty())
                || (!thinking.trim().is_empty() && !extra.contains_key("thinkingSignature"))
        }
        _ => true,
    })
}

/// A message prepared for a wire: borrowed from the history when the
/// transformation leaves it as it is (16 bytes, not a `Message`'s 300+).
#[derive(Debug)]
pub(crate) enum Msg<'a> {
    Borrowed(&'a Message),
    Owned(Box<Message>),
}

impl Msg<'_> {
    fn into_owned(self) -> Message {
        match self {
            Msg::Borrowed(m) => m.clone(),
            Msg::Owned(m) => *m,
        }
    }
}

impl std::ops::Deref for Msg<'_> {
    type Target = Message;
    fn deref(&self) -> &Message {
        match self {
            Msg::Borrowed(m) => m,
            Msg::Owned(m) => m,
        }
    }
}

/// [`transform_messages`] without copies: messages the transformation leaves
/// as they are stay borrowed, so a request never clones the whole history.
/// One pass (the two passes of Pi's function fused), one vector of [`Msg`].
pub(crate) fn transform_borrowed<'a>(
    messages: &'a [Message],
    model: &ModelSpec,
    normalize: &dyn Fn(&str) -> String,
) -> Vec<Msg<'a>> {
    let mut id_map: HashMap<String, String> = HashMap::new();
    let mut result: Vec<Msg<'a>> = Vec::with_capacity(messages.len() + 1);
    let mut pending: Vec<(String, String)> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for m in messages {
        let m = transform_one(m, model, normalize, &mut id_map);
        // Second pass: skip failed turns, pair every tool call with a result.
        match &*m {
            Message::Assistant(a) => {
                flush_missing(&mut result, &mut pending, &mut seen);
                if a.stop_reason == "error" || a.stop_reason == "aborted" {
                    continue;
                }
                pending = a
                    .content
                    .iter()
                    .filter_map(|b| match known(b) {
                        Some(KnownBlock::ToolCall { id, name, .. }) => {
                            Some((id.clone(), name.clone()))
                        }
                        _ => None,
                    })
                    .collect();
                result.push(m);
            }
            Message::ToolResult(r) => {
                // Bh addition to Pi: an orphan result (no matching call in the preceding
                // assistant message, or a duplicate) would be rejected by both wires.
                if pending.iter().any(|(id, _)| *id == r.tool_call_id)
                    && seen.insert(r.tool_call_id.clone())
                {
                    result.push(m);
                }
            }
            Message::User(_) => {
                flush_missing(&mut result, &mut pending, &mut seen);
                pending.clear();
                result.push(m);
            }
        }
    }
    flush_missing(&mut result, &mut pending, &mut seen);
    result
}

/// A synthetic error result for every pending call that got none.
fn flush_missing(
    result: &mut Vec<Msg<'_>>,
    pending: &mut Vec<(String, String)>,
    seen: &mut HashSet<String>,
) {
    for (id, name) in pending.drain(..) {
        if !seen.contains(&id) {
            result.push(Msg::Owned(Box::new(Message::ToolResult(
                ToolResultMessage {
                    role: "toolResult".to_owned(),
                    tool_call_id: id,
                    tool_name: name,
                    content: vec![ContentBlock::text("No result provided")],
                    details: None,
                    is_error: true,
                    timestamp: now_ms(),
                    extra: BTreeMap::new(),
                },
            ))));
        }
    }
    seen.clear();
}

/// The first pass of Pi's `transformMessages` for one message.
fn transform_one<'a>(
    m: &'a Message,
    model: &ModelSpec,
    normalize: &dyn Fn(&str) -> String,
    id_map: &mut HashMap<String, String>,
) -> Msg<'a> {
    let owned = |m: Message| Msg::Owned(Box::new(m));
    match m {
        Message::User(u) => match &u.content {
            Content::Blocks(b) if !model.input_images && has_images(b) => {
                let mut u = u.clone();
                u.content = Content::Blocks(replace_images(b, NON_VISION_USER_IMAGE_PLACEHOLDER));
                owned(Message::User(u))
            }
            _ => Msg::Borrowed(m),
        },
        Message::ToolResult(r) => {
            let images = !model.input_images && has_images(&r.content);
            let renamed = id_map.get(&r.tool_call_id);
            if !images && renamed.is_none() {
                return Msg::Borrowed(m);
            }
            let mut r = r.clone();
            if images {
                r.content = replace_images(&r.content, NON_VISION_TOOL_IMAGE_PLACEHOLDER);
            }
            if let Some(n) = renamed {
                r.tool_call_id = n.clone();
            }
            owned(Message::ToolResult(r))
        }
        Message::Assistant(a) => {
            let same = model.is_same_model(a);
            if same && same_model_unchanged(a) {
                return Msg::Borrowed(m);
            }
            let mut a = a.clone();
            let mut content = Vec::with_capacity(a.content.len());
            for b in a.content.drain(..) {
                match b {
                    ContentBlock::Known(KnownBlock::Thinking {
                        thinking,
                        mut extra,
                    }) => {
                        if is_redacted(&extra) {
                            if same {
                                content.push(ContentBlock::Known(KnownBlock::Thinking {
                                    thinking,
                                    extra,
                                }));
                            }
                            continue;
                        }
                        let has_sig = block_extra_str(&extra, "thinkingSignature")
                            .is_some_and(|s| !s.is_empty());
                        if same && has_sig {
                            content.push(ContentBlock::Known(KnownBlock::Thinking {
                                thinking,
                                extra,
                            }));
                        } else if thinking.trim().is_empty() {
                        } else if same {
                            extra.remove("thinkingSignature");
                            content.push(ContentBlock::Known(KnownBlock::Thinking {
                                thinking,
                                extra,
                            }));
                        } else {
                            content.push(ContentBlock::text(thinking));
                        }
                    }
                    ContentBlock::Known(KnownBlock::Text { text, extra }) => {
                        if same {
                            content.push(ContentBlock::Known(KnownBlock::Text { text, extra }));
                        } else {
                            content.push(ContentBlock::text(text));
                        }
                    }
                    ContentBlock::Known(KnownBlock::ToolCall {
                        id,
                        name,
                        arguments,
                        mut extra,
                    }) => {
                        let mut id2 = id.clone();
                        if !same {
                            extra.remove("thoughtSignature");
                            id2 = normalize(&id);
                            if id2 != id {
                                id_map.insert(id.clone(), id2.clone());
                            }
                        }
                        content.push(ContentBlock::Known(KnownBlock::ToolCall {
                            id: id2,
                            name,
                            arguments,
                            extra,
                        }));
                    }
                    other => content.push(other),
                }
            }
            a.content = content;
            owned(Message::Assistant(a))
        }
    }
}
