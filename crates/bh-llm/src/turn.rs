//! The assistant turn being built: content blocks, usage, stop reason; every change is
//! also sent as a [`StreamEvent`].

use std::collections::BTreeMap;

use bh_protocol::message::{AssistantMessage, ContentBlock, KnownBlock, Usage};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use crate::args::parse_tool_call_arguments;
use crate::json::parse_streaming_json;
use crate::types::{ModelSpec, StopReason, StreamEvent, zero_usage};

/// Pi's message for a cancelled request.
pub const ABORTED_MESSAGE: &str = "Request was aborted";

#[derive(Debug, Clone)]
pub(crate) enum Block {
    Text {
        text: String,
        signature: Option<String>,
    },
    Thinking {
        thinking: String,
        signature: Option<String>,
        redacted: bool,
    },
    ToolCall {
        id: String,
        name: String,
        args: String,
        /// Set when the server sent the arguments as a JSON value, not a string.
        whole: Option<Value>,
        thought_signature: Option<String>,
        /// The final arguments once the wire ended the call: Pi's one full parse of the
        /// complete text (`parseToolCallArguments`), with `argumentsError` when it is not a
        /// JSON object. A call the stream never finished keeps the streaming preview.
        finished: Option<(Value, Option<String>)>,
    },
}

#[derive(Debug)]
pub(crate) struct Slot {
    pub block: Block,
    pub ended: bool,
}

pub(crate) struct Turn {
    pub slots: Vec<Slot>,
    pub usage: Usage,
    pub stop_reason: StopReason,
    pub error_message: Option<String>,
    pub response_id: Option<String>,
    pub response_model: Option<String>,
    pub api: String,
    pub provider: String,
    pub model: String,
    pub timestamp: i64,
    /// The provider's own stop reason (Pi's `rawStopReason`), once one arrived.
    pub raw_stop_reason: Option<String>,
    /// Set by [`Turn::fail`]: blocks ended after this keep their streaming preview.
    failed: bool,
    /// When this attempt started, for Pi 1.6's `durationMs` (monotonic clock), and the
    /// wall clock then: a message whose `timestamp` is older (a scripted, fixed one) stays
    /// untimed, as in Pi.
    started_at: std::time::Instant,
    started_ms: i64,
    started: bool,
    tx: UnboundedSender<StreamEvent>,
}

pub(crate) use bh_fs::now_ms;

impl Turn {
    pub fn new(model: &ModelSpec, tx: UnboundedSender<StreamEvent>) -> Turn {
        let now = now_ms();
        Turn {
            slots: Vec::new(),
            usage: zero_usage(),
            stop_reason: StopReason::Stop,
            error_message: None,
            response_id: None,
            response_model: None,
            api: model.api.as_str().to_owned(),
            provider: model.provider.clone(),
            model: model.id.clone(),
            timestamp: now,
            raw_stop_reason: None,
            failed: false,
            started_at: std::time::Instant::now(),
            started_ms: now,
            started: false,
            tx,
        }
    }

    /// The consumer dropped the stream.
    pub fn consumer_gone(&self) -> bool {
        self.tx.is_closed()
    }

    pub fn emit(&self, ev: StreamEvent) {
        // A dropped receiver is noticed through `consumer_gone`.
        let _ = self.tx.send(ev);
    }

    pub fn start(&mut self) {
        if !self.started {
            self.started = true;
            self.emit(StreamEvent::Start);
        }
    }

    fn push(&mut self, block: Block) -> usize {
        self.slots.push(Slot {
            block,
            ended: false,
        });
        self.slots.len() - 1
    }

    pub fn text_start(&mut self) -> usize {
        let i = self.push(Block::Text {
            text: String::new(),
            signature: None,
        });
        self.emit(StreamEvent::TextStart { index: i });
        i
    }

    pub fn thinking_start(&mut self, signature: Option<String>, redacted: bool) -> usize {
        let i = self.push(Block::Thinking {
            thinking: String::new(),
            signature,
            redacted,
        });
        self.emit(StreamEvent::ThinkingStart { index: i });
        i
    }

    pub fn tool_call_start(&mut self, id: String, name: String) -> usize {
        let i = self.push(Block::ToolCall {
            id: id.clone(),
            name: name.clone(),
            args: String::new(),
            whole: None,
            thought_signature: None,
            finished: None,
        });
        self.emit(StreamEvent::ToolCallStart { index: i, id, name });
        i
    }

    pub fn delta(&mut self, index: usize, delta: &str) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        let ev = match &mut slot.block {
            Block::Text { text, .. } => {
                text.push_str(delta);
                StreamEvent::TextDelta {
                    index,
                    delta: delta.to_owned(),
                }
            }
            Block::Thinking { thinking, .. } => {
                thinking.push_str(delta);
                StreamEvent::ThinkingDelta {
                    index,
                    delta: delta.to_owned(),
                }
            }
            Block::ToolCall { args, whole, .. } => {
                // Quirk: a server that re-sends the complete arguments in every chunk.
                let complete = |s: &str| {
                    serde_json::from_str::<Value>(s)
                        .map(|v| v.is_object())
                        .unwrap_or(false)
                };
                if !args.is_empty() && complete(args) && complete(delta) {
                    args.clear();
                }
                *whole = None;
                args.push_str(delta);
                StreamEvent::ToolCallDelta {
                    index,
                    delta: delta.to_owned(),
                }
            }
        };
        self.emit(ev);
    }

    /// Arguments delivered as a JSON value instead of a string.
    pub fn tool_args_whole(&mut self, index: usize, value: Value) {
        if let Some(Slot {
            block: Block::ToolCall { args, whole, .. },
            ..
        }) = self.slots.get_mut(index)
        {
            let s = value.to_string();
            args.clear();
            args.push_str(&s);
            *whole = Some(value);
            self.emit(StreamEvent::ToolCallDelta { index, delta: s });
        }
    }

    pub fn append_signature(&mut self, index: usize, sig: &str) {
        if let Some(Slot {
            block: Block::Thinking { signature, .. },
            ..
        }) = self.slots.get_mut(index)
        {
            signature.get_or_insert_with(String::new).push_str(sig);
        }
    }

    pub fn end(&mut self, index: usize) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        if slot.ended {
            return;
        }
        slot.ended = true;
        let failed = self.failed;
        let ev = match &mut slot.block {
            Block::Text { text, .. } => StreamEvent::TextEnd {
                index,
                text: text.clone(),
            },
            Block::Thinking {
                thinking,
                signature,
                ..
            } => StreamEvent::ThinkingEnd {
                index,
                thinking: thinking.clone(),
                signature: signature.clone(),
            },
            Block::ToolCall {
                id,
                name,
                args,
                whole,
                finished,
                ..
            } => {
                if id.is_empty() {
                    *id = format!("call_{}", uuid::Uuid::now_v7().simple());
                }
                let (arguments, arguments_error) = match whole {
                    Some(v) => (v.clone(), None),
                    None if failed => (parse_streaming_json(args), None),
                    None => {
                        let (value, error) = parse_tool_call_arguments(args);
                        *finished = Some((value.clone(), error.clone()));
                        (value, error)
                    }
                };
                StreamEvent::ToolCallEnd {
                    index,
                    id: id.clone(),
                    name: name.clone(),
                    arguments,
                    arguments_error,
                }
            }
        };
        self.emit(ev);
    }

    pub fn end_all(&mut self) {
        for i in 0..self.slots.len() {
            self.end(i);
        }
    }

    pub fn has_tool_calls(&self) -> bool {
        self.slots
            .iter()
            .any(|s| matches!(s.block, Block::ToolCall { .. }))
    }

    /// Drop everything received (before a retry).
    pub fn reset(&mut self) {
        self.slots.clear();
        self.usage = zero_usage();
        self.stop_reason = StopReason::Stop;
        self.error_message = None;
        self.response_id = None;
        self.response_model = None;
        self.raw_stop_reason = None;
        self.failed = false;
        // A retry is a new attempt, as Pi's auto-retry is a new request: its own
        // timestamp and duration.
        self.timestamp = now_ms();
        self.started_ms = self.timestamp;
        self.started_at = std::time::Instant::now();
    }

    pub fn fail(&mut self, reason: StopReason, message: String) {
        self.failed = true;
        self.stop_reason = reason;
        self.error_message = Some(message);
    }

    /// The message this attempt ends with as a failure `message` (before a retry):
    /// what it streamed so far, blocks as they stand.
    pub fn failed_attempt(&mut self, message: String) -> AssistantMessage {
        self.fail(StopReason::Error, message);
        let content = self
            .slots
            .iter()
            .map(|s| block_to_protocol(s.block.clone()))
            .collect();
        self.message(content)
    }

    /// Build the final message and send `Done`.
    pub fn finish(mut self) -> AssistantMessage {
        let content = std::mem::take(&mut self.slots)
            .into_iter()
            .map(|s| block_to_protocol(s.block))
            .collect();
        let msg = self.message(content);
        let _ = self.tx.send(StreamEvent::Done(Box::new(msg.clone())));
        msg
    }

    fn message(&self, content: Vec<ContentBlock>) -> AssistantMessage {
        // Pi 1.6: how long the response took, in whole milliseconds.
        let duration_ms = (self.timestamp >= self.started_ms).then(|| {
            Value::from(u64::try_from(self.started_at.elapsed().as_millis()).unwrap_or(u64::MAX))
        });
        AssistantMessage {
            role: "assistant".to_owned(),
            content,
            api: self.api.clone(),
            provider: self.provider.clone(),
            model: self.model.clone(),
            usage: self.usage.clone(),
            stop_reason: self.stop_reason.as_str().to_owned(),
            timestamp: self.timestamp,
            response_id: self.response_id.clone().map(Value::String),
            response_model: self.response_model.clone().map(Value::String),
            raw_stop_reason: self.raw_stop_reason.clone().map(Value::String),
            error_message: self.error_message.clone(),
            duration_ms,
            thinking_level: None,
            extra: BTreeMap::new(),
        }
    }
}

fn block_to_protocol(b: Block) -> ContentBlock {
    let mut extra = BTreeMap::new();
    ContentBlock::Known(match b {
        Block::Text { text, signature } => {
            if let Some(s) = signature {
                extra.insert("textSignature".to_owned(), Value::String(s));
            }
            KnownBlock::Text { text, extra }
        }
        Block::Thinking {
            thinking,
            signature,
            redacted,
        } => {
            if let Some(s) = signature {
                extra.insert("thinkingSignature".to_owned(), Value::String(s));
            }
            if redacted {
                extra.insert("redacted".to_owned(), Value::Bool(true));
            }
            KnownBlock::Thinking { thinking, extra }
        }
        Block::ToolCall {
            id,
            name,
            args,
            whole,
            thought_signature,
            finished,
        } => {
            if let Some(s) = thought_signature {
                extra.insert("thoughtSignature".to_owned(), Value::String(s));
            }
            let arguments = match (whole, finished) {
                (Some(v), _) => v,
                (None, Some((v, error))) => {
                    if let Some(e) = error {
                        extra.insert("argumentsError".to_owned(), Value::String(e));
                    }
                    v
                }
                (None, None) => parse_streaming_json(&args),
            };
            let id = if id.is_empty() {
                format!("call_{}", uuid::Uuid::now_v7().simple())
            } else {
                id
            };
            KnownBlock::ToolCall {
                id,
                name,
                arguments,
                extra,
            }
        }
    })
}
