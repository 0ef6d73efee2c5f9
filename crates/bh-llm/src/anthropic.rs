//! Anthropic Messages (`POST {base_url}/v1/messages`, `stream: true`), as Pi's
//! `anthropic-messages` provider sends and reads it (pi-ai 0.73.1 `dist/providers/anthropic.js`;
//! the stream read as pi-ai 1.6 `dist/api/anthropic-messages.js` reads it).
//! The stream's events are read in [`events`], one step per event kind.

use std::collections::HashMap;

use bh_protocol::message::{Content, ContentBlock, KnownBlock};
use eventsource_stream::Event;
use reqwest::StatusCode;
use serde_json::{Map, Value, json};

use crate::convert::{normalize_id_anthropic, transform_borrowed};
use crate::http::{Built, Flow, StreamFailure, Wire};
use crate::turn::Turn;
use crate::types::{
    ChatRequest, Message, ModelSpec, StopReason, ThinkingLevel, block_extra_str, is_redacted, known,
};

mod events;

use events::EventKind;

pub const ANTHROPIC_VERSION: &str = "2023-06-01";
const INTERLEAVED_THINKING_BETA: &str = "interleaved-thinking-2025-05-14";

/// Pi's `mapStopReason` for Anthropic; `None` for an unknown reason (Pi: error
/// "Unhandled stop reason: …").
pub fn map_stop_reason(reason: &str) -> Option<StopReason> {
    Some(match reason {
        "end_turn" | "pause_turn" | "stop_sequence" => StopReason::Stop,
        "max_tokens" => StopReason::Length,
        "tool_use" => StopReason::ToolUse,
        "refusal" | "sensitive" => StopReason::Error,
        _ => return None,
    })
}

fn supports_adaptive_thinking(id: &str) -> bool {
    [
        "opus-4-6",
        "opus-4.6",
        "opus-4-7",
        "opus-4.7",
        "sonnet-4-6",
        "sonnet-4.6",
    ]
    .iter()
    .any(|p| id.contains(p))
}

fn convert_blocks(content: &[ContentBlock]) -> Value {
    let has_images = content
        .iter()
        .any(|b| matches!(known(b), Some(KnownBlock::Image { .. })));
    if !has_images {
        let texts: Vec<&str> = content
            .iter()
            .filter_map(|b| match known(b) {
                Some(KnownBlock::Text { text, .. }) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        return Value::String(texts.join("\n"));
    }
    let mut blocks: Vec<Value> = content.iter().filter_map(user_block).collect();
    if !blocks.iter().any(|b| b["type"] == "text") {
        blocks.insert(0, json!({"type": "text", "text": "(see attached image)"}));
    }
    Value::Array(blocks)
}

fn user_block(b: &ContentBlock) -> Option<Value> {
    match known(b)? {
        KnownBlock::Text { text, .. } => Some(json!({"type": "text", "text": text})),
        KnownBlock::Image {
            data, mime_type, ..
        } => Some(json!({"type": "image", "source": {
            "type": "base64", "media_type": mime_type, "data": data}})),
        _ => None,
    }
}

/// Build the `messages` array (Pi's `convertMessages`), with `cache_control` on the
/// last user block.
pub fn convert_messages(model: &ModelSpec, req: &ChatRequest) -> Vec<Value> {
    let mut out = Vec::new();
    each_message(model, req, &mut |m| out.push(m));
    out
}

/// [`convert_messages`] one message at a time (the last one is held back for
/// its `cache_control`), so that the request body can be written without
/// holding the whole array as JSON values.
fn each_message(model: &ModelSpec, req: &ChatRequest, emit: &mut dyn FnMut(Value)) {
    let mut last: Option<Value> = None;
    each_message_plain(model, req, &mut |m| {
        if let Some(previous) = last.replace(m) {
            emit(previous);
        }
    });
    if let Some(mut last) = last {
        cache_last_user_block(&mut last);
        emit(last);
    }
}

/// `cache_control` on the last block of the last message when it is a user message.
fn cache_last_user_block(last: &mut Value) {
    if last["role"] != "user" {
        return;
    }
    let cc = json!({"type": "ephemeral"});
    if let Some(s) = last["content"].as_str().map(str::to_owned) {
        last["content"] = json!([{"type": "text", "text": s, "cache_control": cc}]);
    } else if let Some(arr) = last["content"].as_array_mut()
        && let Some(b) = arr.last_mut()
        && let Some(o) = b.as_object_mut()
    {
        o.insert("cache_control".into(), cc);
    }
}

fn each_message_plain(model: &ModelSpec, req: &ChatRequest, emit: &mut dyn FnMut(Value)) {
    let messages = transform_borrowed(&req.messages, model, &normalize_id_anthropic);
    let mut i = 0;
    while i < messages.len() {
        match &*messages[i] {
            Message::User(u) => match &u.content {
                Content::Text(s) => {
                    if !s.trim().is_empty() {
                        emit(json!({"role": "user", "content": s}));
                    }
                }
                Content::Blocks(blocks) => {
                    let blocks: Vec<Value> = blocks
                        .iter()
                        .filter_map(user_block)
                        .filter(|b| {
                            b["type"] != "text"
                                || b["text"].as_str().is_some_and(|t| !t.trim().is_empty())
                        })
                        .collect();
                    if !blocks.is_empty() {
                        emit(json!({"role": "user", "content": blocks}));
                    }
                }
            },
            Message::Assistant(a) => {
                let mut blocks = Vec::new();
                for b in &a.content {
                    match known(b) {
                        Some(KnownBlock::Text { text, .. }) if !text.trim().is_empty() => {
                            blocks.push(json!({"type": "text", "text": text}));
                        }
                        Some(KnownBlock::Thinking { thinking, extra }) => {
                            let sig = block_extra_str(extra, "thinkingSignature").unwrap_or("");
                            if is_redacted(extra) {
                                blocks.push(json!({"type": "redacted_thinking", "data": sig}));
                                continue;
                            }
                            if thinking.trim().is_empty() {
                                continue;
                            }
                            if sig.trim().is_empty() {
                                blocks.push(json!({"type": "text", "text": thinking}));
                            } else {
                                blocks.push(json!({"type": "thinking", "thinking": thinking, "signature": sig}));
                            }
                        }
                        Some(KnownBlock::ToolCall {
                            id,
                            name,
                            arguments,
                            ..
                        }) => {
                            let input = if arguments.is_object() {
                                arguments.clone()
                            } else {
                                json!({})
                            };
                            blocks.push(
                                json!({"type": "tool_use", "id": id, "name": name, "input": input}),
                            );
                        }
                        _ => {}
                    }
                }
                if !blocks.is_empty() {
                    emit(json!({"role": "assistant", "content": blocks}));
                }
            }
            Message::ToolResult(_) => {
                let mut results = Vec::new();
                while let Some(Message::ToolResult(r)) = messages.get(i).map(|m| &**m) {
                    results.push(json!({
                        "type": "tool_result",
                        "tool_use_id": r.tool_call_id,
                        "content": convert_blocks(&r.content),
                        "is_error": r.is_error,
                    }));
                    i += 1;
                }
                i -= 1;
                emit(json!({"role": "user", "content": results}));
            }
        }
        i += 1;
    }
}

fn thinking_budget(level: ThinkingLevel) -> u64 {
    match level {
        ThinkingLevel::Off => 0,
        ThinkingLevel::Minimal => 1024,
        ThinkingLevel::Low => 2048,
        ThinkingLevel::Medium => 8192,
        ThinkingLevel::High | ThinkingLevel::Xhigh => 16384,
    }
}

/// Build the request body (Pi's `buildParams`).
pub fn build_body(model: &ModelSpec, req: &ChatRequest) -> Value {
    let mut p = params(model, req);
    p.insert(
        "messages".into(),
        Value::Array(convert_messages(model, req)),
    );
    Value::Object(p)
}

/// [`build_body`] serialised, byte for byte, without building the `messages`
/// array as JSON values first.
pub fn body_bytes(model: &ModelSpec, req: &ChatRequest) -> Result<Vec<u8>, serde_json::Error> {
    body_bytes_sized(model, req, 0)
}

/// [`body_bytes`] into a buffer of `capacity` bytes to begin with.
pub(crate) fn body_bytes_sized(
    model: &ModelSpec,
    req: &ChatRequest,
    capacity: usize,
) -> Result<Vec<u8>, serde_json::Error> {
    crate::body::write(
        &params(model, req),
        &|emit| each_message(model, req, emit),
        capacity,
    )
}

/// The body without its messages (`messages` is a `null` placeholder).
fn params(model: &ModelSpec, req: &ChatRequest) -> Map<String, Value> {
    let mut p = Map::new();
    let mut max = req
        .max_tokens
        .unwrap_or_else(|| model.max_tokens.min(32_000));
    let thinking_on = model.reasoning && req.thinking != ThinkingLevel::Off;
    let mut thinking = None;
    if model.reasoning {
        if !thinking_on {
            thinking = Some(json!({"type": "disabled"}));
        } else if supports_adaptive_thinking(&model.id) {
            thinking = Some(json!({"type": "adaptive"}));
            let effort = match req.thinking {
                ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
                ThinkingLevel::Medium => "medium",
                _ => "high",
            };
            p.insert("output_config".into(), json!({"effort": effort}));
        } else {
            // Pi's `adjustMaxTokensForThinking`.
            let mut budget = thinking_budget(req.thinking);
            max = (max + budget).min(model.max_tokens);
            if max <= budget {
                budget = max.saturating_sub(1024);
            }
            // Pi sends `budget_tokens: budget || 1024`.
            let budget = if budget == 0 { 1024 } else { budget };
            thinking = Some(json!({"type": "enabled", "budget_tokens": budget}));
        }
    }
    p.insert("model".into(), json!(model.id));
    p.insert("messages".into(), Value::Null);
    p.insert("max_tokens".into(), json!(max));
    p.insert("stream".into(), json!(true));
    if let Some(sp) = &req.system_prompt {
        p.insert(
            "system".into(),
            json!([{"type": "text", "text": sp, "cache_control": {"type": "ephemeral"}}]),
        );
    }
    if let Some(t) = req.temperature
        && !thinking_on
    {
        p.insert("temperature".into(), json!(t));
    }
    if !req.tools.is_empty() {
        let n = req.tools.len();
        let tools: Vec<Value> = req
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut params = t.parameters();
                let props = params.get_mut("properties").map_or(json!({}), Value::take);
                let required = params.get_mut("required").map_or(json!([]), Value::take);
                let mut v = json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": {"type": "object", "properties": props, "required": required},
                });
                if i + 1 == n
                    && let Some(o) = v.as_object_mut()
                {
                    o.insert("cache_control".into(), json!({"type": "ephemeral"}));
                }
                v
            })
            .collect();
        p.insert("tools".into(), Value::Array(tools));
    }
    if let Some(t) = thinking {
        p.insert("thinking".into(), t);
    }
    p
}

/// The streaming parser.
#[derive(Default)]
pub(crate) struct AnthropicWire {
    model: Option<ModelSpec>,
    /// Anthropic block index → content index.
    blocks: HashMap<u64, usize>,
    saw_start: bool,
    saw_stop: bool,
    saw_stop_reason: bool,
}

impl AnthropicWire {
    pub fn new(model: &ModelSpec) -> AnthropicWire {
        AnthropicWire {
            model: Some(model.clone()),
            ..AnthropicWire::default()
        }
    }

    fn update_usage(&self, u: &Value, turn: &mut Turn, initial: bool) {
        let get = |k: &str| u.get(k).and_then(Value::as_u64);
        let write_1h = u
            .pointer("/cache_creation/ephemeral_1h_input_tokens")
            .and_then(Value::as_u64);
        if initial {
            turn.usage.input = get("input_tokens").unwrap_or(0);
            turn.usage.output = get("output_tokens").unwrap_or(0);
            turn.usage.cache_read = get("cache_read_input_tokens").unwrap_or(0);
            turn.usage.cache_write = get("cache_creation_input_tokens").unwrap_or(0);
            turn.usage.extra.insert(
                "cacheWrite1h".to_owned(),
                Value::from(write_1h.unwrap_or(0)),
            );
        } else {
            if let Some(v) = write_1h {
                turn.usage
                    .extra
                    .insert("cacheWrite1h".to_owned(), Value::from(v));
            }
            // Reasoning tokens, a subset of the output tokens.
            if let Some(v) = u
                .pointer("/output_tokens_details/thinking_tokens")
                .and_then(Value::as_u64)
            {
                turn.usage
                    .extra
                    .insert("reasoning".to_owned(), Value::from(v));
            }
            if let Some(v) = get("input_tokens") {
                turn.usage.input = v;
            }
            if let Some(v) = get("output_tokens") {
                turn.usage.output = v;
            }
            if let Some(v) = get("cache_read_input_tokens") {
                turn.usage.cache_read = v;
            }
            if let Some(v) = get("cache_creation_input_tokens") {
                turn.usage.cache_write = v;
            }
        }
        let us = &mut turn.usage;
        us.total_tokens = us.input + us.output + us.cache_read + us.cache_write;
        if let Some(m) = &self.model {
            m.cost.apply(&mut turn.usage);
        }
    }
}

impl Wire for AnthropicWire {
    fn build(&self, model: &ModelSpec, req: &ChatRequest, capacity: usize) -> Built {
        let base = model.base_url.trim_end_matches('/');
        let url = if base.ends_with("/v1") {
            format!("{base}/messages")
        } else {
            format!("{base}/v1/messages")
        };
        let mut headers = vec![("anthropic-version".to_owned(), ANTHROPIC_VERSION.to_owned())];
        if let Some(k) = model.api_key.as_deref().filter(|k| !k.is_empty()) {
            headers.push(("x-api-key".to_owned(), k.to_owned()));
        }
        if model.reasoning
            && req.thinking != ThinkingLevel::Off
            && !supports_adaptive_thinking(&model.id)
        {
            headers.push((
                "anthropic-beta".to_owned(),
                INTERLEAVED_THINKING_BETA.to_owned(),
            ));
        }
        (url, headers, body_bytes_sized(model, req, capacity))
    }

    fn reset(&mut self) {
        let model = self.model.take();
        *self = AnthropicWire {
            model,
            ..AnthropicWire::default()
        };
    }

    /// One SSE event: an `error` fails the stream, an unknown kind is skipped,
    /// and a known one is parsed and read by its step (in [`events`]).
    fn on_event(&mut self, ev: &Event, turn: &mut Turn) -> Result<Flow, StreamFailure> {
        if ev.event == "error" {
            return Err(events::stream_error(ev));
        }
        let Some(kind) = EventKind::of(&ev.event) else {
            return Ok(Flow::Continue);
        };
        let mut e = events::parse_data(ev)?;
        match kind {
            EventKind::MessageStart => self.message_start(&e, turn),
            EventKind::ContentBlockStart => self.content_block_start(&mut e, turn),
            EventKind::ContentBlockDelta => self.content_block_delta(&e, turn),
            EventKind::ContentBlockStop => self.content_block_stop(&e, turn),
            EventKind::MessageDelta => self.message_delta(&e, turn)?,
            EventKind::MessageStop => return self.message_stop(turn),
        }
        Ok(Flow::Continue)
    }

    fn on_eof(&mut self, turn: &mut Turn) -> Result<(), StreamFailure> {
        // Pi 1.6's checks, in its order; the early ends are retried like Pi's auto-retry.
        if self.saw_start && !self.saw_stop {
            return Err(StreamFailure {
                message: "Anthropic stream ended before message_stop".to_owned(),
                retryable: true,
            });
        }
        if !self.saw_stop_reason {
            return Err(StreamFailure {
                message: "Anthropic stream ended without a stop reason".to_owned(),
                retryable: true,
            });
        }
        if matches!(turn.stop_reason, StopReason::Error | StopReason::Aborted) {
            return Err(StreamFailure {
                message: turn
                    .error_message
                    .clone()
                    .unwrap_or_else(|| "An unknown error occurred".to_owned()),
                retryable: false,
            });
        }
        Ok(())
    }

    fn http_error_message(&self, status: StatusCode, body: &str) -> String {
        // The Anthropic SDK's `APIError`: "<status> <JSON body>".
        let body = body.trim();
        if body.is_empty() {
            format!("{} status code (no body)", status.as_u16())
        } else {
            format!("{} {body}", status.as_u16())
        }
    }
}
