//! OpenAI Chat Completions (`POST {base_url}/chat/completions`, `stream: true`), as Pi's
//! `openai-completions` provider sends and reads it
//! (pi-ai 0.73.1 `dist/providers/openai-completions.js`; the corpus `fake-server-requests.jsonl`;
//! the stream read as pi-ai 1.6 `dist/api/openai-completions.js` reads it).
//! The `messages` array is built in [`messages`], one step per message kind.

use std::collections::HashMap;

use bh_protocol::message::{KnownBlock, Usage};
use eventsource_stream::Event;
use reqwest::StatusCode;
use serde_json::{Map, Value, json};

use crate::http::{Built, Flow, StreamFailure, Wire};
use crate::quirks::MaxTokensField;
use crate::turn::Turn;
use crate::types::{ChatRequest, Message, ModelSpec, StopReason, ThinkingLevel, known, zero_usage};

mod messages;

use messages::{REASONING_FIELDS, each_message};

/// Pi's `mapStopReason` for `finish_reason`.
pub fn map_finish_reason(reason: &str) -> (StopReason, Option<String>) {
    match reason {
        "stop" | "end" => (StopReason::Stop, None),
        "length" => (StopReason::Length, None),
        "function_call" | "tool_calls" => (StopReason::ToolUse, None),
        other => (
            StopReason::Error,
            Some(format!("Provider finish_reason: {other}")),
        ),
    }
}

/// Pi's `parseChunkUsage`: `input` excludes cached tokens.
pub fn parse_usage(raw: &Value, model: &ModelSpec) -> Usage {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let prompt = n(raw.get("prompt_tokens"));
    let details = raw.get("prompt_tokens_details");
    // Pi 1.6: `cached_tokens` are cache reads; a separate `cache_write_tokens` is not
    // subtracted from them (0.73.1 did). DeepSeek reports `prompt_cache_hit_tokens`, Kimi a
    // top-level `cached_tokens`.
    let cache_read = details
        .and_then(|d| d.get("cached_tokens"))
        .filter(|v| !v.is_null())
        .or_else(|| raw.get("prompt_cache_hit_tokens").filter(|v| !v.is_null()))
        .or_else(|| raw.get("cached_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let cache_write = n(details.and_then(|d| d.get("cache_write_tokens")));
    let input = prompt
        .saturating_sub(cache_read)
        .saturating_sub(cache_write);
    let output = n(raw.get("completion_tokens"));
    let reasoning = match n(raw.pointer("/completion_tokens_details/reasoning_tokens")) {
        0 => n(raw.get("reasoning_tokens")),
        r => r,
    };
    let mut usage = zero_usage();
    usage.input = input;
    usage.output = output;
    usage.cache_read = cache_read;
    usage.cache_write = cache_write;
    usage.total_tokens = input + output + cache_read + cache_write;
    usage
        .extra
        .insert("reasoning".to_owned(), Value::from(reasoning));
    model.cost.apply(&mut usage);
    usage
}

/// Build the `messages` array (Pi's `convertMessages`).
pub fn convert_messages(model: &ModelSpec, req: &ChatRequest) -> Vec<Value> {
    let mut out = Vec::new();
    each_message(model, req, &mut |m| out.push(m));
    out
}

/// Build the full request body (Pi's `buildParams`).
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
    let q = &model.quirks;
    let mut p = Map::new();
    p.insert("model".into(), json!(model.id));
    p.insert("messages".into(), Value::Null);
    p.insert("stream".into(), json!(true));
    if q.supports_usage_in_streaming {
        p.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if q.supports_store {
        p.insert("store".into(), json!(false));
    }
    let max = req.max_tokens.unwrap_or(model.max_tokens.min(32_000));
    if max > 0 {
        let field = match q.max_tokens_field {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        };
        p.insert(field.into(), json!(max));
    }
    if let Some(t) = req.temperature {
        p.insert("temperature".into(), json!(t));
    }
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                let mut f = json!({"name": t.name, "description": t.description, "parameters": t.parameters()});
                if q.supports_strict_mode
                    && let Some(o) = f.as_object_mut()
                {
                    o.insert("strict".into(), json!(false));
                }
                json!({"type": "function", "function": f})
            })
            .collect();
        p.insert("tools".into(), Value::Array(tools));
    } else if has_tool_history(&req.messages) {
        p.insert("tools".into(), json!([]));
    }
    if model.reasoning && q.supports_reasoning_effort && req.thinking != ThinkingLevel::Off {
        let effort = match req.thinking {
            ThinkingLevel::Minimal => "minimal",
            ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            _ => "high",
        };
        p.insert("reasoning_effort".into(), json!(effort));
    }
    p
}

fn has_tool_history(messages: &[Message]) -> bool {
    messages.iter().any(|m| match m {
        Message::ToolResult(_) => true,
        Message::Assistant(a) => a
            .content
            .iter()
            .any(|b| matches!(known(b), Some(KnownBlock::ToolCall { .. }))),
        Message::User(_) => false,
    })
}

/// The streaming parser.
#[derive(Default)]
pub(crate) struct OpenAiWire {
    model: Option<ModelSpec>,
    text: Option<usize>,
    thinking: Option<usize>,
    by_index: HashMap<u64, usize>,
    by_id: HashMap<String, usize>,
    last_tool: Option<usize>,
    saw_finish: bool,
}

impl OpenAiWire {
    pub fn new(model: &ModelSpec) -> OpenAiWire {
        OpenAiWire {
            model: Some(model.clone()),
            ..OpenAiWire::default()
        }
    }

    fn on_chunk(&mut self, chunk: &Value, turn: &mut Turn) -> Result<(), StreamFailure> {
        if let Some(err) = chunk.get("error") {
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| err.to_string());
            return Err(StreamFailure {
                message,
                retryable: false,
            });
        }
        // Pi: `responseId ||= chunk.id` — Azure's first chunk has an empty id.
        if turn.response_id.as_deref().is_none_or(str::is_empty)
            && let Some(id) = chunk.get("id").and_then(Value::as_str)
        {
            turn.response_id = Some(id.to_owned());
        }
        if let Some(m) = chunk.get("model").and_then(Value::as_str)
            && !m.is_empty()
            && m != turn.model
            && turn.response_model.is_none()
        {
            turn.response_model = Some(m.to_owned());
        }
        let model = self.model.clone();
        let usage_of = |raw: &Value| model.as_ref().map(|m| parse_usage(raw, m));
        let chunk_usage = chunk.get("usage").filter(|u| u.is_object());
        if let Some(u) = chunk_usage.and_then(usage_of) {
            turn.usage = u;
        }
        let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)) else {
            return Ok(());
        };
        if chunk_usage.is_none()
            && let Some(u) = choice
                .get("usage")
                .filter(|u| u.is_object())
                .and_then(usage_of)
        {
            turn.usage = u;
        }
        if let Some(fr) = choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            self.saw_finish = true;
            turn.raw_stop_reason = Some(fr.to_owned());
            let (reason, msg) = map_finish_reason(fr);
            turn.stop_reason = reason;
            if msg.is_some() {
                turn.error_message = msg;
            }
        }
        let Some(delta) = choice.get("delta").filter(|d| d.is_object()) else {
            return Ok(());
        };
        // Reasoning first: a whole message (non-streaming reply) thinks before it speaks.
        for field in REASONING_FIELDS {
            if let Some(s) = delta.get(field).and_then(Value::as_str)
                && !s.is_empty()
            {
                let i = match self.thinking {
                    Some(i) => i,
                    None => {
                        let i = turn.thinking_start(Some(field.to_owned()), false);
                        self.thinking = Some(i);
                        i
                    }
                };
                turn.delta(i, s);
                break;
            }
        }
        if let Some(s) = delta.get("content").and_then(Value::as_str)
            && !s.is_empty()
        {
            let i = match self.text {
                Some(i) => i,
                None => {
                    let i = turn.text_start();
                    self.text = Some(i);
                    i
                }
            };
            turn.delta(i, s);
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for call in calls {
                self.on_tool_call(call, turn);
            }
        }
        Ok(())
    }

    fn on_tool_call(&mut self, call: &Value, turn: &mut Turn) {
        let index = call.get("index").and_then(Value::as_u64);
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let func = call.get("function");
        let name = func
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let mut slot = index.and_then(|i| self.by_index.get(&i).copied());
        // Quirk: servers that number every call `index: 0`; a different id is a new call.
        if let (Some(s), Some(id)) = (slot, id)
            && let Some(crate::turn::Slot {
                block: crate::turn::Block::ToolCall { id: existing, .. },
                ..
            }) = turn.slots.get(s)
            && !existing.is_empty()
            && existing != id
        {
            slot = None;
        }
        if slot.is_none() {
            slot = id.and_then(|id| self.by_id.get(id).copied());
        }
        if slot.is_none() && index.is_none() && id.is_none() && name.is_none() {
            // Continuation chunk without index or id: the last call.
            slot = self.last_tool;
        }
        let slot = match slot {
            Some(s) => s,
            None => turn.tool_call_start(
                id.unwrap_or_default().to_owned(),
                name.unwrap_or_default().to_owned(),
            ),
        };
        if let Some(i) = index {
            self.by_index.insert(i, slot);
        }
        if let Some(id) = id {
            self.by_id.insert(id.to_owned(), slot);
        }
        self.last_tool = Some(slot);
        if let Some(crate::turn::Slot {
            block:
                crate::turn::Block::ToolCall {
                    id: bid,
                    name: bname,
                    ..
                },
            ..
        }) = turn.slots.get_mut(slot)
        {
            if bid.is_empty()
                && let Some(id) = id
            {
                *bid = id.to_owned();
            }
            if bname.is_empty()
                && let Some(n) = name
            {
                *bname = n.to_owned();
            }
        }
        match func.and_then(|f| f.get("arguments")) {
            Some(Value::String(s)) if !s.is_empty() => turn.delta(slot, s),
            Some(v @ Value::Object(_)) => turn.tool_args_whole(slot, v.clone()),
            _ => {}
        }
    }
}

impl Wire for OpenAiWire {
    fn build(&self, model: &ModelSpec, req: &ChatRequest, capacity: usize) -> Built {
        let url = format!("{}/chat/completions", model.base_url.trim_end_matches('/'));
        let mut headers = Vec::new();
        if let Some(k) = model.api_key.as_deref().filter(|k| !k.is_empty()) {
            headers.push(("authorization".to_owned(), format!("Bearer {k}")));
        }
        (url, headers, body_bytes_sized(model, req, capacity))
    }

    fn reset(&mut self) {
        let model = self.model.take();
        *self = OpenAiWire {
            model,
            ..OpenAiWire::default()
        };
    }

    fn on_event(&mut self, ev: &Event, turn: &mut Turn) -> Result<Flow, StreamFailure> {
        let data = ev.data.trim();
        if data.is_empty() {
            return Ok(Flow::Continue);
        }
        if data == "[DONE]" {
            // Pi reads on to the end of the body; `[DONE]` is its end.
            self.on_eof(turn)?;
            return Ok(Flow::Done);
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| StreamFailure {
            message: format!("Could not parse stream chunk: {e}: {data}"),
            retryable: false,
        })?;
        self.on_chunk(&chunk, turn)?;
        Ok(Flow::Continue)
    }

    fn on_json_body(&mut self, body: &Value, turn: &mut Turn) -> Result<(), StreamFailure> {
        // A `chat.completion` object: replay its message as one delta chunk.
        let mut chunk = body.clone();
        if let Some(choice) = chunk
            .get_mut("choices")
            .and_then(|c| c.get_mut(0))
            .and_then(Value::as_object_mut)
            && let Some(mut message) = choice.remove("message")
        {
            if let Some(calls) = message.get_mut("tool_calls").and_then(Value::as_array_mut) {
                for (i, c) in calls.iter_mut().enumerate() {
                    if let Some(o) = c.as_object_mut() {
                        o.entry("index").or_insert(json!(i));
                    }
                }
            }
            choice.insert("delta".into(), message);
        }
        self.on_chunk(&chunk, turn)?;
        self.on_eof(turn)
    }

    fn on_eof(&mut self, turn: &mut Turn) -> Result<(), StreamFailure> {
        // Pi finishes every block (the full parse of tool arguments) before it checks
        // how the stream ended.
        turn.end_all();
        if turn.stop_reason == StopReason::Error && self.saw_finish {
            return Err(StreamFailure {
                message: turn
                    .error_message
                    .clone()
                    .unwrap_or_else(|| "Provider returned an error stop reason".to_owned()),
                retryable: false,
            });
        }
        if self.saw_finish {
            Ok(())
        } else {
            Err(StreamFailure {
                message: "Stream ended without finish_reason".to_owned(),
                retryable: true,
            })
        }
    }

    fn http_error_message(&self, status: StatusCode, body: &str) -> String {
        // The OpenAI SDK's `APIError` message: "<status> <error.message>".
        let parsed: Option<Value> = serde_json::from_str(body).ok();
        let detail = parsed.as_ref().map(|v| {
            let e = v.get("error").unwrap_or(v);
            match e.get("message") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => e.to_string(),
            }
        });
        match detail {
            Some(d) => format!("{} {d}", status.as_u16()),
            None if body.trim().is_empty() => format!("{} status code (no body)", status.as_u16()),
            None => format!("{} {}", status.as_u16(), body.trim()),
        }
    }
}
