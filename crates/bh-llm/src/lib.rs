//! A thin streaming LLM client that produces assistant messages exactly in the shape
//! the Pi coding agent stores them (`shared/design/pi-sessions.md` §3.4).
//!
//! # Overview
//!
//! * [`Provider::stream`] takes a [`ChatRequest`] (system prompt, Pi-shaped history,
//!   [`ToolSpec`]s) and a [`CancellationToken`](tokio_util::sync::CancellationToken),
//!   and returns a stream of [`StreamEvent`]s: text deltas, thinking deltas (with
//!   signatures), tool-call start / argument delta / end, retries, and always a final
//!   [`StreamEvent::Done`] with a [`bh_protocol::message::AssistantMessage`]:
//!   `content` blocks (`text`, `thinking` + `thinkingSignature`, `toolCall`),
//!   `api`, `provider`, `model`, `usage` (`input`, `output`, `cacheRead`, `cacheWrite`,
//!   `totalTokens`, `cost{…}`), `stopReason` (`stop`, `length`, `toolUse`, `error`,
//!   `aborted`), `errorMessage`, `responseId`, and the current Pi's (1.6) `responseModel`,
//!   `rawStopReason`, `usage.reasoning`, `usage.cacheWrite1h`.
//! * A finished tool call's arguments are parsed as Pi 1.6 does ([`args`]): repaired,
//!   then either a JSON object or `{}` plus `argumentsError`; never a salvaged prefix.
//! * Providers: [`HttpProvider`] speaks Anthropic Messages (`/v1/messages`) or OpenAI
//!   Chat Completions (`/chat/completions`, any base URL, with a [`Quirks`] table for
//!   Ollama, vLLM, llama.cpp …), both over SSE; [`ScriptedProvider`] replays a file.
//! * Failures never escape as `Err`: HTTP errors, stream errors and cut streams become
//!   `stopReason: "error"` with Pi's `errorMessage` (`"500 Scripted failure…"`),
//!   cancellation becomes `stopReason: "aborted"`, `errorMessage: "Request was
//!   aborted"`, with the partial content kept. 408/409/429/5xx, connection failures and
//!   streams that end early (also after content arrived, announced by
//!   [`StreamEvent::Retry`]) are retried per [`RetryPolicy`] (Pi's 2 s, 4 s, 8 s),
//!   honouring `retry-after` / `retry-after-ms`.
//! * History conversion follows Pi's `transformMessages`: failed (`error`/`aborted`)
//!   turns are skipped, foreign thinking becomes text, tool-call ids are normalised
//!   for the target wire, every tool call gets exactly one result (synthetic
//!   `"No result provided"` when missing), orphan results are dropped. Use
//!   [`Message::from_agent_message`] for Pi's `custom`, `branchSummary`,
//!   `compactionSummary` and `bashExecution` messages.
//! * [`Config`] reads a TOML provider table and Pi's `models.json`; it never reads
//!   the environment: [`Config::key_source`] tells the caller where the key lives.
//!
//! # Scripted provider
//!
//! [`Script::parse`] accepts a JSON object `{"provider"?, "model"?, "api"?, "turns":
//! [TURN…]}`, a JSON array `[TURN…]`, or JSONL with one `TURN` per line (blank lines
//! and lines starting with `#` or `//` are ignored). Each call to
//! [`Provider::stream`] plays the next turn, whatever the request; past the last turn
//! the call ends with `stopReason: "error"`. A `TURN` object (camelCase, unknown keys
//! rejected):
//!
//! | key | type | meaning |
//! |---|---|---|
//! | `thinking` | string | a thinking block (first) |
//! | `thinkingSignature` | string | its `thinkingSignature` |
//! | `text` | string | a text block (after thinking) |
//! | `toolCalls` | `[{"id"?, "name", "arguments"}]` | tool calls (last); `id` defaults to `call_<turn>_<i>` |
//! | `content` | Pi content blocks | used verbatim instead of the three above |
//! | `usage` | `{"input","output","cacheRead","cacheWrite"}` | token counts; `totalTokens` and `cost` are computed from the model's prices |
//! | `stopReason` | `stop` \| `length` \| `toolUse` \| `error` \| `aborted` | default `toolUse` with tool calls, else `stop` |
//! | `errorMessage` | string | stored as `errorMessage` (default `"scripted error"` for `error`) |
//! | `delayMs` | integer | pause before each streamed event (cancellation tests) |
//! | `chunkChars` | integer | split text/thinking into deltas of this many characters |
//! | `timestamp` | integer ms | fixed `timestamp` for byte-stable output |
//!
//! ```text
//! {"text": "I'll create the file.", "toolCalls": [{"name": "write", "arguments": {"path": "a.txt", "content": "hi\n"}}]}
//! {"thinking": "Done.", "text": "Created a.txt.", "usage": {"input": 120, "output": 8}}
//! ```

// Libraries never print: what they have to say is a value (an error, an
// event, a report) that the CLI shows. A guard, not a habit.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod anthropic;
pub mod args;
mod body;
mod config;
mod convert;
mod error;
mod http;
pub mod json;
mod openai;
mod provider;
mod quirks;
mod scripted;
mod turn;
mod types;

pub use config::{Config, KeySource, ModelConfig, ModelRef, ProviderConfig, ResolveOptions};
pub use convert::{normalize_id_anthropic, normalize_id_openai, transform_messages};
pub use error::LlmError;
pub use http::{RetryPolicy, retry_after};
pub use provider::{HttpProvider, Provider, collect};
pub use quirks::{MaxTokensField, Quirks, QuirksOverride};
pub use scripted::{Script, ScriptToolCall, ScriptTurn, ScriptUsage, ScriptedProvider};
pub use turn::ABORTED_MESSAGE;
pub use types::{
    Api, BRANCH_SUMMARY_PREFIX, BRANCH_SUMMARY_SUFFIX, COMPACTION_SUMMARY_PREFIX,
    COMPACTION_SUMMARY_SUFFIX, ChatRequest, EventStream, Message, ModelCost, ModelSpec, StopReason,
    StreamEvent, ThinkingLevel, ToolSpec, zero_usage,
};

/// Wire-level request builders and mappings, exposed for tests and debugging.
pub mod wire {
    pub mod openai {
        pub use crate::openai::{
            body_bytes, build_body, convert_messages, map_finish_reason, parse_usage,
        };
    }
    pub mod anthropic {
        pub use crate::anthropic::{
            ANTHROPIC_VERSION, body_bytes, build_body, convert_messages, map_stop_reason,
        };
    }
}
