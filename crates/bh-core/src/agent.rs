//! The loop itself.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bh_checkpoint::{LiveStats, LiveStore, SnapshotRequest, Store};
use bh_llm::{ChatRequest, Message, Provider, StreamEvent, ThinkingLevel};
use bh_protocol::message::{AssistantMessage, Content, ContentBlock, KnownBlock, UserMessage};
use bh_session::SessionWriter;
use bh_tools::{ToolResult, ToolUpdate, Toolbox};
use futures::StreamExt;
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use crate::error::{CoreError, Result};
use crate::event::{AssistantDelta, AssistantMessageEvent, Event, ToolExecutionResult};

use crate::outcome::{LimitKind, Limits, OverheadStats, RunOutcome, RunStop};

mod history;
mod run;
mod stream;
mod tools;

use history::load_history;
use tools::{attach_checkpoint, truncated_call_message};

/// Everything an [`Agent`] needs. Nothing is read from the environment.
pub struct AgentConfig {
    pub provider: Arc<dyn Provider>,
    pub toolbox: Arc<Toolbox>,
    /// The tools offered to the model (default: the toolbox's profile).
    pub tools: Option<Vec<&'static bh_tools::ToolSpec>>,
    /// Appends to the session; its leaf is where the run continues.
    pub session: SessionWriter,
    /// Checkpoint before every mutating tool call; `None` turns checkpoints off.
    pub checkpoints: Option<Arc<Store>>,
    pub system_prompt: Option<String>,
    pub thinking: ThinkingLevel,
    pub max_tokens: Option<u64>,
    pub limits: Limits,
}

/// An agent bound to one session file.
pub struct Agent {
    provider: Arc<dyn Provider>,
    toolbox: Arc<Toolbox>,
    tools: Vec<&'static bh_tools::ToolSpec>,
    llm_tools: Vec<bh_llm::ToolSpec>,
    writer: SessionWriter,
    session_id: String,
    /// The store, watched for this agent's lifetime (see `LiveStore`).
    checkpoints: Option<Arc<LiveStore>>,
    system_prompt: Option<String>,
    thinking: ThinkingLevel,
    max_tokens: Option<u64>,
    limits: Limits,
    history: Vec<Message>,
    started: Option<Instant>,
    turns: u64,
    tool_calls: u64,
    /// Time spent appending to the session (for the overhead breakdown).
    persist_time: Duration,
}

use bh_fs::now_ms;

/// Aborts a spawned task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    if d.subsec_millis() != 0 || s == 0 {
        format!("{}ms", d.as_millis())
    } else if s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

fn to_value<T: Serialize>(v: &T) -> Result<Box<RawValue>> {
    Ok(serde_json::value::to_raw_value(v)?)
}

impl Agent {
    /// Binds the agent to the session: builds the model history from the
    /// session's context at the writer's leaf, and appends `model_change` /
    /// `thinking_level_change` entries when the session is new or they differ.
    pub fn new(config: AgentConfig) -> Result<Agent> {
        let mut writer = config.session;
        let (session_id, history) =
            load_history(&mut writer, config.provider.model(), config.thinking)?;
        let tools = config
            .tools
            .unwrap_or_else(|| config.toolbox.specs().to_vec());
        let llm_tools = tools.iter().map(|s| (*s).clone()).collect();
        Ok(Agent {
            provider: config.provider,
            toolbox: config.toolbox,
            tools,
            llm_tools,
            writer,
            session_id,
            checkpoints: config.checkpoints.map(|s| Arc::new(LiveStore::new(s))),
            system_prompt: config.system_prompt,
            thinking: config.thinking,
            max_tokens: config.max_tokens,
            limits: config.limits,
            history,
            started: None,
            turns: 0,
            tool_calls: 0,
            persist_time: Duration::ZERO,
        })
    }

    pub fn session_path(&self) -> &std::path::Path {
        self.writer.path()
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    pub fn leaf(&self) -> Option<&str> {
        self.writer.leaf()
    }

    pub fn provider(&self) -> &Arc<dyn Provider> {
        &self.provider
    }

    pub fn checkpoint_store(&self) -> Option<&Arc<Store>> {
        self.checkpoints.as_ref().map(|live| live.store())
    }

    /// How this agent's checkpoints were taken (watched fast path or ordinary).
    pub fn checkpoint_stats(&self) -> Option<LiveStats> {
        self.checkpoints.as_ref().map(|live| live.stats())
    }

    /// The messages the next model call starts from.
    pub fn history(&self) -> &[Message] {
        &self.history
    }

    /// Restart the limit counters and clock (e.g. per interactive prompt).
    pub fn reset_limits(&mut self) {
        self.started = None;
        self.turns = 0;
        self.tool_calls = 0;
    }

    fn synthetic_aborted(&self, reason: &str) -> AssistantMessage {
        let spec = self.provider.model();
        AssistantMessage {
            role: "assistant".into(),
            content: vec![],
            api: spec.api.as_str().into(),
            provider: spec.provider.clone(),
            model: spec.id.clone(),
            usage: bh_llm::zero_usage(),
            stop_reason: "aborted".into(),
            timestamp: now_ms(),
            error_message: Some(reason.to_owned()),
            response_id: None,
            response_model: None,
            raw_stop_reason: None,
            duration_ms: None,
            thinking_level: None,
            extra: Default::default(),
        }
    }

    fn limit_reason(&self, kind: LimitKind) -> String {
        match kind {
            LimitKind::ToolCalls => format!(
                "Tool call limit reached ({} tool calls)",
                self.limits.max_tool_calls.unwrap_or(0)
            ),
            LimitKind::Time => format!(
                "Time limit reached ({})",
                human_duration(self.limits.timeout.unwrap_or_default())
            ),
            LimitKind::Turns => format!(
                "Turn limit reached ({} turns)",
                self.limits.max_turns.unwrap_or(0)
            ),
        }
    }

    /// One user turn: append the prompt, then model → tools → results until
    /// the model stops, a limit fires or `cancel` fires. Every message is
    /// appended to the session as it completes; `sink` receives the events.
    ///
    /// Model and tool failures are part of the outcome, not errors; `Err`
    /// means the session could not be written.
    pub async fn run(
        &mut self,
        prompt: &str,
        cancel: &CancellationToken,
        sink: &mut (dyn FnMut(Event) + Send),
    ) -> Result<RunOutcome> {
        let user = UserMessage::new(Content::Blocks(vec![ContentBlock::text(prompt)]), now_ms());
        self.run_message(user, cancel, sink).await
    }

    /// Persist an assistant message, emit its `message_end`, add it to the history.
    fn finish_assistant(
        &mut self,
        msg: &AssistantMessage,
        sink: &mut (dyn FnMut(Event) + Send),
    ) -> Result<String> {
        let value = to_value(msg)?;
        let entry = self.persist(msg)?;
        sink(Event::MessageEnd { message: value });
        self.history.push(Message::Assistant(Box::new(msg.clone())));
        Ok(entry)
    }
}
