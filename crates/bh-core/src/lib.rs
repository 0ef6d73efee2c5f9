//! The agent loop of Better Harness.
//!
//! An [`Agent`] is bound to one Pi session file (through
//! [`bh_session::SessionWriter`]), one model ([`bh_llm::Provider`]) and one
//! confined [`bh_tools::Toolbox`]. [`Agent::run`] takes one user prompt:
//!
//! ```text
//! append user message
//! loop:
//!   limits / cancellation checked          → aborted assistant message with the reason
//!   model call (streamed)                  → assistant message appended
//!   no tool calls, error or aborted        → stop
//!   for each tool call:
//!     tool-call limit / cancellation       → error result "…: tool call not executed"
//!     mutating (edit, write, bash)?        → checkpoint (bh-checkpoint), id in details.checkpoint;
//!                                            a failed checkpoint is a `warning` event
//!     run the tool on a blocking thread    → toolResult appended
//!     the harness cannot run it            → error result, later calls not run,
//!                                            aborted message (`RunStop::Harness`)
//! ```
//!
//! Invariants:
//! * Every message is appended to the session as it completes, in Pi's
//!   shapes, so Pi can open the file at any moment; nothing is rewritten.
//! * Every tool call of an assistant message that ended normally gets exactly
//!   one `toolResult`, also when a limit or cancellation stops the run midway
//!   (calls not run get an error result saying why). An aborted or failed
//!   assistant message keeps its partial content, tool calls included, and
//!   they are not executed (as Pi; providers skip such turns on replay).
//! * Before a mutating tool call the project is checkpointed, with the
//!   session id and the assistant entry id as the checkpoint's `Bh-Session` /
//!   `Bh-Entry`; the result's `details.checkpoint` holds the checkpoint id.
//! * Limits count from the agent's first run until [`Agent::reset_limits`]
//!   (the CLI: the whole headless command; interactive: each prompt).
//! * Event order follows Pi: the `toolResult` messages of a turn are appended
//!   to the file as each tool ends, and their `message_start`/`message_end`
//!   events come after all `tool_execution_*` events of the turn. A running
//!   `bash` streams its output as `tool_execution_update` events (Pi's
//!   `partialResult`: the truncated tail so far, at most every 100 ms), all
//!   before the call's `tool_execution_end`.
//! * A run that is stopped (cancellation, a hard limit) ends with an assistant
//!   message with `stopReason: "aborted"` and `errorMessage` naming the reason
//!   (`"Request was aborted"`, `"Tool call limit reached (N tool calls)"`,
//!   `"Time limit reached (30s)"`, `"Turn limit reached (N turns)"`); partial
//!   streamed content is kept. [`RunOutcome`] says which limit fired.
//! * Model and tool failures are messages, not errors: `Err` from a run
//!   means the session could not be written. A tool failure either tells
//!   the model (the tool's own error result) or ends the turn (a
//!   [`bh_tools::HarnessFailure`]: the sandbox cannot be built, the project
//!   folder is gone), by its type (see `agent/run.rs`).
//! * Events ([`Event`]) serialise to Pi's `--mode json` lines (`agent_start`,
//!   `turn_start`, `message_start/update/end`, `tool_execution_start/update/end`,
//!   `turn_end`, `agent_end`; `message_update` carries Pi's
//!   `assistantMessageEvent` with its `partial` snapshot and the same
//!   snapshot as `message`), plus
//!   `checkpoint`, `warning`, `retry` and a final `run_end` (with
//!   `overhead`: the loop's own time per executed tool call, excluding the
//!   model's stream, the tool and the checkpoint; see [`OverheadStats`]).
//!
//! No printing, no environment, no `$HOME`: everything comes in through
//! [`AgentConfig`].

// Libraries never print: what they have to say is a value (an error, an
// event, a report) that the CLI shows. A guard, not a habit.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod agent;
mod error;
mod event;
mod outcome;

pub use agent::{Agent, AgentConfig};
pub use error::{CoreError, Result};
pub use event::{AssistantDelta, AssistantMessageEvent, Event, ToolExecutionResult};
pub use outcome::{LimitKind, Limits, OverheadStats, RunOutcome, RunStop};
