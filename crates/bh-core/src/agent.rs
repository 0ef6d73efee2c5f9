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

use bh_protocol::now_ms;

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

    /// [`Agent::run`] with a ready user message (images, custom content).
    #[allow(
        clippy::too_many_lines,
        reason = "a phase orchestrator not yet split into named steps (issue 26)"
    )]
    pub async fn run_message(
        &mut self,
        user: UserMessage,
        cancel: &CancellationToken,
        sink: &mut (dyn FnMut(Event) + Send),
    ) -> Result<RunOutcome> {
        let started = *self.started.get_or_insert_with(Instant::now);
        let run_cancel = cancel.child_token();
        let time_fired = Arc::new(AtomicBool::new(false));
        let _timer = self.limits.timeout.map(|t| {
            let deadline = tokio::time::Instant::from_std(started + t);
            let token = run_cancel.clone();
            let fired = time_fired.clone();
            AbortOnDrop(tokio::spawn(async move {
                tokio::time::sleep_until(deadline).await;
                fired.store(true, Ordering::SeqCst);
                token.cancel();
            }))
        });
        // `agent_end` lists this run's messages: the history from here on
        // (not kept twice while the run goes).
        let run_start = self.history.len();
        let mut checkpoints = Vec::new();

        sink(Event::AgentStart);
        sink(Event::TurnStart);
        let user_value = to_value(&user)?;
        self.persist(&user)?;
        sink(Event::MessageStart {
            message: user_value.clone(),
        });
        sink(Event::MessageEnd {
            message: user_value,
        });
        self.history.push(Message::User(user));

        let mut overhead = Vec::new();
        let mut persist = Vec::new();
        let mut first = true;
        let (stop, limit, last) = loop {
            let turn_started = Instant::now();
            let persist_before = self.persist_time;
            // Time of this turn spent in the model's stream, the tools and checkpoints.
            let mut excluded = Duration::ZERO;
            if !first {
                sink(Event::TurnStart);
            }
            first = false;

            // Limits and cancellation before a model call.
            let pre = if time_fired.load(Ordering::SeqCst)
                || self.limits.timeout.is_some_and(|t| started.elapsed() >= t)
            {
                Some((RunStop::Limit, Some(LimitKind::Time)))
            } else if cancel.is_cancelled() {
                Some((RunStop::Cancelled, None))
            } else if self.limits.max_turns.is_some_and(|m| self.turns >= m) {
                Some((RunStop::Limit, Some(LimitKind::Turns)))
            } else {
                None
            };
            if let Some((stop, limit)) = pre {
                let reason = match limit {
                    Some(kind) => self.limit_reason(kind),
                    None => bh_llm::ABORTED_MESSAGE.to_owned(),
                };
                let msg = self.synthetic_aborted(&reason);
                sink(Event::MessageStart {
                    message: to_value(&msg)?,
                });
                self.finish_assistant(&msg, sink)?;
                sink(Event::TurnEnd {
                    message: Box::new(msg.clone()),
                    tool_results: vec![],
                });
                break (stop, limit, msg);
            }

            self.turns += 1;
            let (mut msg, retries) = self.sample(&run_cancel, sink, &mut excluded).await?;
            let aborted = msg.stop_reason == "aborted";
            let (abort_stop, abort_limit) = if time_fired.load(Ordering::SeqCst) {
                (RunStop::Limit, Some(LimitKind::Time))
            } else {
                (RunStop::Cancelled, None)
            };
            if aborted && abort_limit.is_some() {
                msg.error_message = Some(self.limit_reason(LimitKind::Time));
            }
            let entry = self.finish_assistant(&msg, sink)?;
            if let Some(end) = stream::retry_end(retries, &msg) {
                sink(end);
            }
            // Each call with the reason it must not run, if any (Pi 1.6's gating): a
            // response cut by the output token limit may carry truncated arguments that
            // still parse, and arguments that are not a JSON object were stored as `{}`
            // plus `argumentsError`; neither is ever executed.
            let truncated = msg.stop_reason == "length";
            let calls: Vec<(String, String, Value, Option<String>)> = msg
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Known(KnownBlock::ToolCall {
                        id,
                        name,
                        arguments,
                        extra,
                    }) => {
                        let refusal = if truncated {
                            Some(truncated_call_message(name))
                        } else if !self.offers(name) {
                            None
                        } else {
                            extra
                                .get("argumentsError")
                                .and_then(Value::as_str)
                                .map(|e| format!("Invalid arguments for tool \"{name}\": {e}"))
                        };
                        Some((id.clone(), name.clone(), arguments.clone(), refusal))
                    }
                    _ => None,
                })
                .collect();
            if aborted || msg.stop_reason == "error" || calls.is_empty() {
                sink(Event::TurnEnd {
                    message: Box::new(msg.clone()),
                    tool_results: vec![],
                });
                let stop = match msg.stop_reason.as_str() {
                    "aborted" => abort_stop,
                    "error" => RunStop::Error,
                    _ => RunStop::Completed,
                };
                break (stop, if aborted { abort_limit } else { None }, msg);
            }

            let mut results = Vec::with_capacity(calls.len());
            let mut pending = Vec::with_capacity(calls.len());
            let mut stopped: Option<(RunStop, Option<LimitKind>)> = None;
            let mut executed = 0u32;
            for (id, name, args, refusal) in calls {
                if stopped.is_none() && refusal.is_none() {
                    if time_fired.load(Ordering::SeqCst) {
                        stopped = Some((RunStop::Limit, Some(LimitKind::Time)));
                    } else if cancel.is_cancelled() {
                        stopped = Some((RunStop::Cancelled, None));
                    } else if self
                        .limits
                        .max_tool_calls
                        .is_some_and(|m| self.tool_calls >= m)
                    {
                        stopped = Some((RunStop::Limit, Some(LimitKind::ToolCalls)));
                    }
                }
                sink(Event::ToolExecutionStart {
                    tool_call_id: id.clone(),
                    tool_name: name.clone(),
                    args: args.clone(),
                });
                let result = match (refusal, stopped) {
                    (Some(reason), _) => ToolResult::error(reason),
                    (None, Some((_, Some(kind)))) => ToolResult::error(format!(
                        "{}: tool call not executed",
                        self.limit_reason(kind)
                    )),
                    (None, Some((_, None))) => ToolResult::error("Operation aborted"),
                    (None, None) => {
                        self.tool_calls += 1;
                        executed += 1;
                        let work = Instant::now();
                        let cp = self.checkpoint(&id, &name, &entry, sink).await;
                        let mut result = self.execute(&id, &name, &args, &run_cancel, sink).await?;
                        if let Some(cp) = cp {
                            let refs = tools::ref_moves(&result);
                            let after = self
                                .checkpoint_after(&id, &name, &entry, &cp, refs, sink)
                                .await;
                            attach_checkpoint(&mut result, &cp, after.as_deref());
                            checkpoints.push(cp);
                        }
                        excluded += work.elapsed();
                        result
                    }
                };
                sink(Event::ToolExecutionEnd {
                    tool_call_id: id.clone(),
                    tool_name: name.clone(),
                    result: ToolExecutionResult {
                        content: result.to_message(&id, &name, 0).content,
                        details: result.details.clone(),
                    },
                    is_error: result.is_error,
                });
                // Persisted at once; its message events follow all the
                // executions, in call order, as Pi emits them.
                let message = result.to_message(&id, &name, now_ms());
                let value = to_value(&message)?;
                self.persist(&message)?;
                pending.push(value);
                self.history.push(Message::ToolResult(message.clone()));
                results.push(message);
            }
            for value in pending {
                sink(Event::MessageStart {
                    message: value.clone(),
                });
                sink(Event::MessageEnd { message: value });
            }
            sink(Event::TurnEnd {
                message: Box::new(msg.clone()),
                tool_results: results,
            });
            if executed > 0 {
                let per_call = turn_started.elapsed().saturating_sub(excluded) / executed;
                overhead.extend(std::iter::repeat_n(per_call, executed as usize));
                let persisted = (self.persist_time.saturating_sub(persist_before)) / executed;
                persist.extend(std::iter::repeat_n(persisted, executed as usize));
            }
            // A limit or cancellation during the tools: close the run with an
            // aborted assistant message saying why.
            let stopped = stopped.or_else(|| {
                if time_fired.load(Ordering::SeqCst) {
                    Some((RunStop::Limit, Some(LimitKind::Time)))
                } else if cancel.is_cancelled() {
                    Some((RunStop::Cancelled, None))
                } else {
                    None
                }
            });
            if let Some((stop, limit)) = stopped {
                sink(Event::TurnStart);
                let reason = match limit {
                    Some(kind) => self.limit_reason(kind),
                    None => bh_llm::ABORTED_MESSAGE.to_owned(),
                };
                let abort = self.synthetic_aborted(&reason);
                sink(Event::MessageStart {
                    message: to_value(&abort)?,
                });
                self.finish_assistant(&abort, sink)?;
                sink(Event::TurnEnd {
                    message: Box::new(abort.clone()),
                    tool_results: vec![],
                });
                break (stop, limit, abort);
            }
        };

        let messages = self.history[run_start.min(self.history.len())..]
            .iter()
            .map(|m| match m {
                Message::User(u) => to_value(u),
                Message::Assistant(a) => to_value(a),
                Message::ToolResult(r) => to_value(r),
            })
            .collect::<Result<Vec<_>>>()?;
        sink(Event::AgentEnd { messages });
        // Entries are written as they complete; make them durable once per run.
        if let Err(e) = self.writer.sync() {
            sink(Event::Warning {
                message: format!("cannot flush the session file to disk: {e}"),
            });
        }
        let reason = match stop {
            RunStop::Completed => None,
            _ => last.error_message.clone(),
        };
        let mut usage = bh_session::Totals::default();
        for m in &self.history[run_start.min(self.history.len())..] {
            if let Message::Assistant(a) = m {
                usage.add(&a.usage);
            }
        }
        let outcome = RunOutcome {
            usage,
            stop,
            limit,
            reason: reason.clone(),
            turns: self.turns,
            tool_calls: self.tool_calls,
            leaf: self.writer.leaf().map(str::to_owned),
            last_assistant: Some(last),
            checkpoints,
            tool_call_overhead: overhead,
            tool_call_persist: persist,
        };
        sink(Event::RunEnd {
            stop,
            limit,
            reason,
            turns: outcome.turns,
            tool_calls: outcome.tool_calls,
            leaf: outcome.leaf.clone(),
            overhead: OverheadStats::of(&outcome.tool_call_overhead, &outcome.tool_call_persist),
        });
        Ok(outcome)
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
