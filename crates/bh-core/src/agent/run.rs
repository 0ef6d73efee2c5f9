//! One run of the loop ([`Agent::run_message`]) as its phases: open the run
//! (the clock, the user message), then per turn the check before the model
//! ([`Agent::halt_before_model`]), the model's message, Pi's gating of its
//! tool calls ([`gate_calls`]), the calls ([`Agent::run_calls`]) and, when
//! something halted the run, the closing aborted message
//! ([`Agent::close_halted`]); last the outcome ([`Agent::finish_run`]).
//!
//! A tool failure either tells the model or ends the turn, never both ways
//! by accident: the tools' own errors are results the model reads; a
//! [`bh_tools::HarnessFailure`] (the sandbox cannot be built, the project
//! folder is gone) is recorded as the call's error result and halts the run
//! like a limit does ([`RunStop::Harness`]): the calls after it are not
//! run, and an aborted assistant message names it.

use super::*;

/// Why the loop stops before the model would.
#[derive(Debug, Clone)]
enum Halt {
    Limit(LimitKind),
    Cancelled,
    /// The harness could not run a tool at all.
    Harness(bh_tools::HarnessFailure),
}

impl Halt {
    fn stop(&self) -> RunStop {
        match self {
            Halt::Limit(_) => RunStop::Limit,
            Halt::Cancelled => RunStop::Cancelled,
            Halt::Harness(_) => RunStop::Harness,
        }
    }

    fn limit(&self) -> Option<LimitKind> {
        match self {
            Halt::Limit(kind) => Some(*kind),
            _ => None,
        }
    }
}

/// The run's clock: when the limits started counting, whether the time
/// limit fired, and the timer that fires it.
struct Clock {
    started: Instant,
    time_fired: Arc<AtomicBool>,
    _timer: Option<AbortOnDrop>,
}

impl Clock {
    fn timed_out(&self) -> bool {
        self.time_fired.load(Ordering::SeqCst)
    }
}

/// One tool call of an assistant message, with the reason it must not run.
struct Call {
    id: String,
    name: String,
    args: Value,
    refusal: Option<String>,
}

/// What the run gathers across its turns for the outcome.
#[derive(Default)]
struct Gathered {
    checkpoints: Vec<String>,
    overhead: Vec<Duration>,
    persist: Vec<Duration>,
}

/// Each tool call of `msg` with the reason it must not run, if any (Pi 1.6's
/// gating): a response cut by the output token limit may carry truncated
/// arguments that still parse, and arguments that are not a JSON object
/// were stored as `{}` plus `argumentsError`; neither is ever executed.
fn gate_calls(msg: &AssistantMessage, offers: impl Fn(&str) -> bool) -> Vec<Call> {
    let truncated = msg.stop_reason == "length";
    msg.content
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
                } else if !offers(name) {
                    None
                } else {
                    extra
                        .get("argumentsError")
                        .and_then(Value::as_str)
                        .map(|e| format!("Invalid arguments for tool \"{name}\": {e}"))
                };
                Some(Call {
                    id: id.clone(),
                    name: name.clone(),
                    args: arguments.clone(),
                    refusal,
                })
            }
            _ => None,
        })
        .collect()
}

impl Agent {
    /// [`Agent::run`] with a ready user message (images, custom content).
    pub async fn run_message(
        &mut self,
        user: UserMessage,
        cancel: &CancellationToken,
        sink: &mut (dyn FnMut(Event) + Send),
    ) -> Result<RunOutcome> {
        let run_cancel = cancel.child_token();
        let clock = self.start_clock(&run_cancel);
        // `agent_end` lists this run's messages: the history from here on
        // (not kept twice while the run goes).
        let run_start = self.history.len();
        let mut gathered = Gathered::default();
        self.open_run(user, sink)?;

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

            if let Some(halt) = self.halt_before_model(&clock, cancel) {
                let msg = self.close_halted(&halt, sink)?;
                break (halt.stop(), halt.limit(), msg);
            }

            self.turns += 1;
            let (mut msg, retries) = self.sample(&run_cancel, sink, &mut excluded).await?;
            let aborted = msg.stop_reason == "aborted";
            let (abort_stop, abort_limit) = if clock.timed_out() {
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
            let calls = gate_calls(&msg, |name| self.offers(name));
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

            let (halt, executed) = self
                .run_calls(
                    calls,
                    &entry,
                    (&clock, cancel, &run_cancel),
                    &mut gathered.checkpoints,
                    &mut excluded,
                    &msg,
                    sink,
                )
                .await?;
            if executed > 0 {
                let per_call = turn_started.elapsed().saturating_sub(excluded) / executed;
                gathered
                    .overhead
                    .extend(std::iter::repeat_n(per_call, executed as usize));
                let persisted = (self.persist_time.saturating_sub(persist_before)) / executed;
                gathered
                    .persist
                    .extend(std::iter::repeat_n(persisted, executed as usize));
            }
            // A halt during the tools: close the run with an aborted
            // assistant message saying why.
            let halt = halt.or_else(|| {
                if clock.timed_out() {
                    Some(Halt::Limit(LimitKind::Time))
                } else if cancel.is_cancelled() {
                    Some(Halt::Cancelled)
                } else {
                    None
                }
            });
            if let Some(halt) = halt {
                sink(Event::TurnStart);
                let abort = self.close_halted(&halt, sink)?;
                break (halt.stop(), halt.limit(), abort);
            }
        };
        self.finish_run(run_start, (stop, limit, last), gathered, sink)
    }

    /// The limits' clock (started at the agent's first run) and the timer
    /// that cancels `run_cancel` when the time limit passes.
    fn start_clock(&mut self, run_cancel: &CancellationToken) -> Clock {
        let started = *self.started.get_or_insert_with(Instant::now);
        let time_fired = Arc::new(AtomicBool::new(false));
        let timer = self.limits.timeout.map(|t| {
            let deadline = tokio::time::Instant::from_std(started + t);
            let token = run_cancel.clone();
            let fired = time_fired.clone();
            AbortOnDrop(tokio::spawn(async move {
                tokio::time::sleep_until(deadline).await;
                fired.store(true, Ordering::SeqCst);
                token.cancel();
            }))
        });
        Clock {
            started,
            time_fired,
            _timer: timer,
        }
    }

    /// `agent_start`, `turn_start`, and the user's message appended.
    fn open_run(&mut self, user: UserMessage, sink: &mut (dyn FnMut(Event) + Send)) -> Result<()> {
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
        Ok(())
    }

    /// Limits and cancellation before a model call.
    fn halt_before_model(&self, clock: &Clock, cancel: &CancellationToken) -> Option<Halt> {
        if clock.timed_out()
            || self
                .limits
                .timeout
                .is_some_and(|t| clock.started.elapsed() >= t)
        {
            Some(Halt::Limit(LimitKind::Time))
        } else if cancel.is_cancelled() {
            Some(Halt::Cancelled)
        } else if self.limits.max_turns.is_some_and(|m| self.turns >= m) {
            Some(Halt::Limit(LimitKind::Turns))
        } else {
            None
        }
    }

    /// Limits and cancellation before a tool call.
    fn halt_before_call(&self, clock: &Clock, cancel: &CancellationToken) -> Option<Halt> {
        if clock.timed_out() {
            Some(Halt::Limit(LimitKind::Time))
        } else if cancel.is_cancelled() {
            Some(Halt::Cancelled)
        } else if self
            .limits
            .max_tool_calls
            .is_some_and(|m| self.tool_calls >= m)
        {
            Some(Halt::Limit(LimitKind::ToolCalls))
        } else {
            None
        }
    }

    /// The `errorMessage` of the aborted message that closes a halted run.
    fn halt_reason(&self, halt: &Halt) -> String {
        match halt {
            Halt::Limit(kind) => self.limit_reason(*kind),
            Halt::Cancelled => bh_llm::ABORTED_MESSAGE.to_owned(),
            Halt::Harness(f) => format!("The harness could not run {}: {}", f.tool, f.message),
        }
    }

    /// The result of a call that a halt kept from running.
    fn not_executed(&self, halt: &Halt) -> ToolResult {
        match halt {
            Halt::Cancelled => ToolResult::error("Operation aborted"),
            h => ToolResult::error(format!("{}: tool call not executed", self.halt_reason(h))),
        }
    }

    /// Runs (or refuses) each call in order, each result appended at once;
    /// their message events follow all the executions, in call order, as Pi
    /// emits them, then `turn_end`. Returns what halted the calls, if
    /// anything, and how many ran.
    #[allow(
        clippy::too_many_arguments,
        reason = "the turn's own state, lent for the calls: one hand-off each"
    )]
    async fn run_calls(
        &mut self,
        calls: Vec<Call>,
        entry: &str,
        (clock, cancel, run_cancel): (&Clock, &CancellationToken, &CancellationToken),
        checkpoints: &mut Vec<String>,
        excluded: &mut Duration,
        msg: &AssistantMessage,
        sink: &mut (dyn FnMut(Event) + Send),
    ) -> Result<(Option<Halt>, u32)> {
        let mut results = Vec::with_capacity(calls.len());
        let mut pending = Vec::with_capacity(calls.len());
        let mut halt: Option<Halt> = None;
        let mut executed = 0u32;
        for Call {
            id,
            name,
            args,
            refusal,
        } in calls
        {
            if halt.is_none() && refusal.is_none() {
                halt = self.halt_before_call(clock, cancel);
            }
            sink(Event::ToolExecutionStart {
                tool_call_id: id.clone(),
                tool_name: name.clone(),
                args: args.clone(),
            });
            let result = match (refusal, &halt) {
                (Some(reason), _) => ToolResult::error(reason),
                (None, Some(h)) => self.not_executed(h),
                (None, None) => {
                    self.tool_calls += 1;
                    executed += 1;
                    let work = Instant::now();
                    let cp = self.checkpoint(&id, &name, entry, sink).await;
                    let outcome = self.execute(&id, &name, &args, run_cancel, sink).await?;
                    let result = match outcome {
                        Ok(mut result) => {
                            if let Some(cp) = cp {
                                let refs = tools::ref_moves(&result);
                                let after = self
                                    .checkpoint_after(&id, &name, entry, &cp, refs, sink)
                                    .await;
                                attach_checkpoint(&mut result, &cp, after.as_deref());
                                checkpoints.push(cp);
                            }
                            result
                        }
                        Err(failure) => {
                            let h = Halt::Harness(failure);
                            let result = ToolResult::error(self.halt_reason(&h));
                            halt = Some(h);
                            result
                        }
                    };
                    *excluded += work.elapsed();
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
        Ok((halt, executed))
    }

    /// The aborted assistant message that closes a halted run, appended,
    /// with its events and `turn_end`.
    fn close_halted(
        &mut self,
        halt: &Halt,
        sink: &mut (dyn FnMut(Event) + Send),
    ) -> Result<AssistantMessage> {
        let abort = self.synthetic_aborted(&self.halt_reason(halt));
        sink(Event::MessageStart {
            message: to_value(&abort)?,
        });
        self.finish_assistant(&abort, sink)?;
        sink(Event::TurnEnd {
            message: Box::new(abort.clone()),
            tool_results: vec![],
        });
        Ok(abort)
    }

    /// `agent_end` with the run's messages, the session made durable, the
    /// outcome and `run_end`.
    fn finish_run(
        &mut self,
        run_start: usize,
        (stop, limit, last): (RunStop, Option<LimitKind>, AssistantMessage),
        gathered: Gathered,
        sink: &mut (dyn FnMut(Event) + Send),
    ) -> Result<RunOutcome> {
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
            checkpoints: gathered.checkpoints,
            tool_call_overhead: gathered.overhead,
            tool_call_persist: gathered.persist,
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
}
