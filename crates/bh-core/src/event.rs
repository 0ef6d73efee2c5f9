//! Events of a run, shaped like Pi's `--mode json` stream
//! (`agent_start, turn_start, message_start/update/end,
//! tool_execution_start/update/end, turn_end, agent_end`), plus Better Harness's own
//! `checkpoint`, `warning` and `run_end`. Retries are announced as Pi 1.6 announces them
//! (`auto_retry_start`, `auto_retry_end`).

use bh_protocol::message::{AssistantMessage, ToolResultMessage};
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::{LimitKind, OverheadStats, RunStop};

/// A streamed delta of the assistant message being generated (the delta part
/// of Pi's `assistantMessageEvent`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AssistantDelta {
    TextStart {
        #[serde(rename = "contentIndex")]
        content_index: usize,
    },
    TextDelta {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        delta: String,
    },
    TextEnd {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        content: String,
    },
    ThinkingStart {
        #[serde(rename = "contentIndex")]
        content_index: usize,
    },
    ThinkingDelta {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        delta: String,
    },
    ThinkingEnd {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        content: String,
    },
    #[serde(rename = "toolcall_start")]
    ToolCallStart {
        #[serde(rename = "contentIndex")]
        content_index: usize,
    },
    #[serde(rename = "toolcall_delta")]
    ToolCallDelta {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        delta: String,
    },
    #[serde(rename = "toolcall_end")]
    ToolCallEnd {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        #[serde(rename = "toolCall")]
        tool_call: Value,
    },
}

/// Pi's `assistantMessageEvent`: the delta and the `partial` snapshot of the
/// message so far (the same snapshot as the event's `message`).
#[derive(Debug, Clone, Serialize)]
pub struct AssistantMessageEvent {
    #[serde(flatten)]
    pub delta: AssistantDelta,
    pub partial: Box<RawValue>,
}

/// The result part of `tool_execution_end` and the `partialResult` of
/// `tool_execution_update` (`content`, `details?`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolExecutionResult {
    pub content: Vec<bh_protocol::message::ContentBlock>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

/// One event of a run. Serialises to one line of Pi's JSON mode; messages
/// keep Pi's key order (they are the serialised typed messages).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    AgentStart,
    TurnStart,
    /// `message` is the user, assistant (empty at start) or toolResult message.
    MessageStart {
        message: Box<RawValue>,
    },
    /// A streamed delta; `message` is the partial assistant message so far.
    MessageUpdate {
        #[serde(rename = "assistantMessageEvent")]
        assistant_message_event: AssistantMessageEvent,
        message: Box<RawValue>,
    },
    MessageEnd {
        message: Box<RawValue>,
    },
    #[serde(rename_all = "camelCase")]
    ToolExecutionStart {
        tool_call_id: String,
        tool_name: String,
        args: Value,
    },
    /// A running tool's output so far (`bash`): Pi's `partialResult`, the
    /// tail truncated as the final result will be.
    #[serde(rename_all = "camelCase")]
    ToolExecutionUpdate {
        tool_call_id: String,
        tool_name: String,
        args: Value,
        partial_result: ToolExecutionResult,
    },
    #[serde(rename_all = "camelCase")]
    ToolExecutionEnd {
        tool_call_id: String,
        tool_name: String,
        result: ToolExecutionResult,
        is_error: bool,
    },
    #[serde(rename_all = "camelCase")]
    TurnEnd {
        message: Box<AssistantMessage>,
        tool_results: Vec<ToolResultMessage>,
    },
    AgentEnd {
        messages: Vec<Box<RawValue>>,
    },
    /// A checkpoint was taken before a mutating tool call (Better Harness).
    #[serde(rename_all = "camelCase")]
    Checkpoint {
        tool_call_id: String,
        tool_name: String,
        id: String,
        created: bool,
    },
    /// Something went wrong without stopping the run (e.g. a failed checkpoint).
    Warning {
        message: String,
    },
    /// Pi 1.6's `auto_retry_start`: the model's stream failed (provider `Retry`) and is
    /// sent again after `delayMs`; `attempt` counts from 1 up to `maxAttempts`.
    #[serde(rename_all = "camelCase")]
    AutoRetryStart {
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        error_message: String,
    },
    /// Pi 1.6's `auto_retry_end`, after the `message_end` of a retried response: `success`
    /// unless that response failed too (`finalError`: its error, or "Retry cancelled" when
    /// the run was cancelled); `attempt` is the number of retries made.
    #[serde(rename_all = "camelCase")]
    AutoRetryEnd {
        success: bool,
        attempt: u32,
        #[serde(skip_serializing_if = "Option::is_none")]
        final_error: Option<String>,
    },
    /// The last event of a run (Better Harness): why it stopped and the counters.
    #[serde(rename_all = "camelCase")]
    RunEnd {
        stop: RunStop,
        #[serde(skip_serializing_if = "Option::is_none")]
        limit: Option<LimitKind>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        turns: u64,
        tool_calls: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        leaf: Option<String>,
        /// Harness overhead per executed tool call (excluding the model's
        /// stream, the tool and the checkpoint), in microseconds.
        #[serde(skip_serializing_if = "Option::is_none")]
        overhead: Option<OverheadStats>,
    },
}
