//! The Anthropic stream's events, one step per event kind, as
//! [`AnthropicWire`]'s `on_event` dispatches them.

use eventsource_stream::Event;
use serde_json::Value;

use super::{AnthropicWire, map_stop_reason};
use crate::http::{Flow, StreamFailure, Wire};
use crate::turn::Turn;

/// The stream events the parser reads; any other kind is skipped.
#[derive(Clone, Copy)]
pub(super) enum EventKind {
    MessageStart,
    ContentBlockStart,
    ContentBlockDelta,
    ContentBlockStop,
    MessageDelta,
    MessageStop,
}

impl EventKind {
    /// The kind named by an SSE `event:` field; `None` for one the parser skips.
    pub(super) fn of(name: &str) -> Option<EventKind> {
        Some(match name {
            "message_start" => EventKind::MessageStart,
            "content_block_start" => EventKind::ContentBlockStart,
            "content_block_delta" => EventKind::ContentBlockDelta,
            "content_block_stop" => EventKind::ContentBlockStop,
            "message_delta" => EventKind::MessageDelta,
            "message_stop" => EventKind::MessageStop,
            _ => return None,
        })
    }
}

/// An `error` event: its data is the message, retryable when its type says so.
pub(super) fn stream_error(ev: &Event) -> StreamFailure {
    let data: Value = serde_json::from_str(&ev.data).unwrap_or(Value::Null);
    StreamFailure {
        message: ev.data.clone(),
        retryable: retryable_error_type(&data),
    }
}

/// An overload, API or rate-limit error, which Pi retries.
fn retryable_error_type(data: &Value) -> bool {
    matches!(
        data.pointer("/error/type").and_then(Value::as_str),
        Some("overloaded_error" | "api_error" | "rate_limit_error")
    )
}

/// A known event's data parsed as JSON; unparsable data fails the stream.
pub(super) fn parse_data(ev: &Event) -> Result<Value, StreamFailure> {
    serde_json::from_str(&ev.data).map_err(|err| StreamFailure {
        message: format!(
            "Could not parse Anthropic SSE event {}: {err}; data={}",
            ev.event, ev.data
        ),
        retryable: false,
    })
}

/// The string field `key` of `v`, `""` when missing or not a string.
fn str_field<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

impl AnthropicWire {
    /// The content index of the block named by the event's `index`, if it was opened.
    fn slot(&self, e: &Value) -> Option<usize> {
        let idx = e.get("index").and_then(Value::as_u64)?;
        self.blocks.get(&idx).copied()
    }

    /// `message_start`: the response's id, the answering model, the first usage.
    pub(super) fn message_start(&mut self, e: &Value, turn: &mut Turn) {
        self.saw_start = true;
        if let Some(id) = e.pointer("/message/id").and_then(Value::as_str) {
            turn.response_id = Some(id.to_owned());
        }
        // Pi 1.6 records the answering model only when it is not the one asked.
        if let Some(m) = e.pointer("/message/model").and_then(Value::as_str)
            && m != turn.model
        {
            turn.response_model = Some(m.to_owned());
        }
        if let Some(u) = e.pointer("/message/usage") {
            self.update_usage(u, turn, true);
        }
    }

    /// `content_block_start`: a text, thinking, redacted-thinking or tool-use
    /// block opens, and its Anthropic index is mapped to its content index.
    pub(super) fn content_block_start(&mut self, e: &mut Value, turn: &mut Turn) {
        let idx = e.get("index").and_then(Value::as_u64);
        let Some(cb) = e.get_mut("content_block") else {
            return;
        };
        let new = match cb.get("type").and_then(Value::as_str) {
            Some("text") => turn.text_start(),
            Some("thinking") => turn.thinking_start(Some(String::new()), false),
            Some("redacted_thinking") => {
                let i = turn.thinking_start(Some(str_field(cb, "data").to_owned()), true);
                turn.delta(i, "[Reasoning redacted]");
                i
            }
            Some("tool_use") => tool_use_start(cb, turn),
            _ => return,
        };
        if let Some(i) = idx {
            self.blocks.insert(i, new);
        }
    }

    /// `content_block_delta`: text, thinking, tool-call JSON or a signature
    /// appended to an opened block.
    pub(super) fn content_block_delta(&self, e: &Value, turn: &mut Turn) {
        let Some(slot) = self.slot(e) else {
            return;
        };
        let d = e.get("delta").unwrap_or(&Value::Null);
        match d.get("type").and_then(Value::as_str) {
            Some("text_delta") => turn.delta(slot, str_field(d, "text")),
            Some("thinking_delta") => turn.delta(slot, str_field(d, "thinking")),
            Some("input_json_delta") => {
                let pj = str_field(d, "partial_json");
                if !pj.is_empty() {
                    turn.delta(slot, pj);
                }
            }
            Some("signature_delta") => turn.append_signature(slot, str_field(d, "signature")),
            _ => {}
        }
    }

    /// `content_block_stop`: an opened block ends.
    pub(super) fn content_block_stop(&self, e: &Value, turn: &mut Turn) {
        if let Some(slot) = self.slot(e) {
            turn.end(slot);
        }
    }

    /// `message_delta`: the stop reason, then the final usage.
    pub(super) fn message_delta(
        &mut self,
        e: &Value,
        turn: &mut Turn,
    ) -> Result<(), StreamFailure> {
        if let Some(r) = e.pointer("/delta/stop_reason").and_then(Value::as_str) {
            self.stop_reason(r, e, turn)?;
        }
        if let Some(u) = e.get("usage") {
            self.update_usage(u, turn, false);
        }
        Ok(())
    }

    /// A stop reason, kept raw and mapped; an unknown one fails the stream.
    fn stop_reason(&mut self, r: &str, e: &Value, turn: &mut Turn) -> Result<(), StreamFailure> {
        turn.raw_stop_reason = Some(r.to_owned());
        let Some(sr) = map_stop_reason(r) else {
            return Err(StreamFailure {
                message: format!("Unhandled stop reason: {r}"),
                retryable: false,
            });
        };
        turn.stop_reason = sr;
        self.saw_stop_reason = true;
        // Pi 1.6: a refusal carries the provider's explanation.
        match r {
            "refusal" => {
                turn.error_message = Some(
                    e.pointer("/delta/stop_details/explanation")
                        .and_then(Value::as_str)
                        .filter(|s| !s.is_empty())
                        .unwrap_or("The model refused to complete the request")
                        .to_owned(),
                );
            }
            "sensitive" => {
                turn.error_message = Some("Provider stopped with: sensitive".to_owned());
            }
            _ => {}
        }
        Ok(())
    }

    /// `message_stop`: the response is complete once the end-of-stream checks pass.
    pub(super) fn message_stop(&mut self, turn: &mut Turn) -> Result<Flow, StreamFailure> {
        self.saw_stop = true;
        self.on_eof(turn).map(|()| Flow::Done)
    }
}

/// A `tool_use` block opens, with its whole input when the start carries a non-empty one.
fn tool_use_start(cb: &mut Value, turn: &mut Turn) -> usize {
    let i = turn.tool_call_start(
        str_field(cb, "id").to_owned(),
        str_field(cb, "name").to_owned(),
    );
    if let Some(input) = cb
        .get_mut("input")
        .filter(|v| v.as_object().is_some_and(|o| !o.is_empty()))
    {
        turn.tool_args_whole(i, input.take());
    }
    i
}
