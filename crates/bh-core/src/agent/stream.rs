//! One model call, streamed: events to the sink, Pi's `partial` snapshot.

use bh_llm::EventStream;

use super::*;

impl Agent {
    /// One model call, streamed to the sink; returns the final message and the number of
    /// retries the provider made for it. Each failed attempt is kept in the session as Pi
    /// 1.6 keeps it: the error message, then a `context_edit` omitting it from the model's
    /// context (`_omitRecoveryAttempt`).
    pub(super) async fn sample(
        &mut self,
        cancel: &CancellationToken,
        sink: &mut (dyn FnMut(Event) + Send),
        model_wait: &mut Duration,
    ) -> Result<(AssistantMessage, u32)> {
        let partial = self.start_message(sink);
        let mut stream = self.open_stream(cancel, model_wait);
        let mut sampling = Sampling {
            partial,
            partial_args: Vec::new(),
            done: None,
            retries: 0,
        };
        while let Some(ev) = next_event(&mut stream, model_wait).await {
            self.follow_event(&mut sampling, ev, sink)?;
        }
        Ok(self.outcome(sampling))
    }

    /// The empty message the stream starts from, announced to the sink.
    fn start_message(&self, sink: &mut (dyn FnMut(Event) + Send)) -> AssistantMessage {
        let mut start = self.synthetic_aborted("");
        start.stop_reason = "stop".into();
        start.error_message = None;
        if let Ok(message) = to_value(&start) {
            sink(Event::MessageStart { message });
        }
        start
    }

    /// The provider's stream for the current history, the time it took to
    /// open added to `model_wait`.
    fn open_stream(&self, cancel: &CancellationToken, model_wait: &mut Duration) -> EventStream {
        // The history is lent, not copied: the provider serialises the
        // request before `stream` returns.
        let request = ChatRequest {
            system_prompt: self.system_prompt.clone(),
            messages: Cow::Borrowed(&self.history),
            tools: Cow::Borrowed(&self.llm_tools),
            max_tokens: self.max_tokens,
            temperature: None,
            thinking: self.thinking,
        };
        let waiting = Instant::now();
        let stream = self.provider.stream(request, cancel.clone());
        *model_wait += waiting.elapsed();
        stream
    }

    /// One stream event followed: the partial snapshot updated, then a
    /// retry recorded, the final message kept, or the delta sent with the
    /// snapshot.
    fn follow_event(
        &mut self,
        sampling: &mut Sampling,
        ev: StreamEvent,
        sink: &mut (dyn FnMut(Event) + Send),
    ) -> Result<()> {
        apply_to_partial(&mut sampling.partial, &mut sampling.partial_args, &ev);
        let delta = match ev {
            StreamEvent::Retry {
                attempt,
                max_retries,
                delay,
                reason,
                failed,
            } => {
                sampling.retries = attempt;
                self.record_failed_attempt(*failed, sink)?;
                sink(Event::AutoRetryStart {
                    attempt,
                    max_attempts: max_retries,
                    delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    error_message: reason,
                });
                // The next attempt is a new message.
                if let Ok(message) = to_value(&sampling.partial) {
                    sink(Event::MessageStart { message });
                }
                None
            }
            StreamEvent::Done(m) => {
                sampling.done = Some(*m);
                None
            }
            ev => assistant_delta(ev),
        };
        if let Some(d) = delta
            && let Ok(snapshot) = to_value(&sampling.partial)
        {
            sink(Event::MessageUpdate {
                assistant_message_event: AssistantMessageEvent {
                    delta: d,
                    partial: snapshot.clone(),
                },
                message: snapshot,
            });
        }
        Ok(())
    }

    /// A failed attempt kept in the session (its message, then a
    /// `context_edit` omitting it) and ended on the sink.
    fn record_failed_attempt(
        &mut self,
        mut failed: AssistantMessage,
        sink: &mut (dyn FnMut(Event) + Send),
    ) -> Result<()> {
        failed.thinking_level = Some(Value::from(self.thinking.as_str()));
        let started = Instant::now();
        let path = self.writer.path().to_path_buf();
        let id = self
            .writer
            .append_message(&failed)
            .map_err(super::history::session_err(&path))?;
        self.writer
            .append_context_edit(&id, None)
            .map_err(super::history::session_err(&path))?;
        self.persist_time += started.elapsed();
        sink(Event::MessageEnd {
            message: to_value(&failed)?,
        });
        Ok(())
    }

    /// The sampling's final message (an error when the stream ended without
    /// one), with the thinking level it was asked with, and its retries.
    fn outcome(&self, sampling: Sampling) -> (AssistantMessage, u32) {
        let mut msg = sampling.done.unwrap_or_else(|| {
            let mut m = self.synthetic_aborted("stream ended without a message");
            m.stop_reason = "error".into();
            m
        });
        // Pi 1.6's agent loop records the thinking level each response was asked with.
        msg.thinking_level = Some(Value::from(self.thinking.as_str()));
        (msg, sampling.retries)
    }
}

/// One sampling's state while its stream is read.
struct Sampling {
    /// Pi's `partial` snapshot of the message being streamed.
    partial: AssistantMessage,
    /// Each streamed tool call's arguments so far, by content index.
    partial_args: Vec<(usize, String)>,
    /// The final message, once the stream gave it.
    done: Option<AssistantMessage>,
    /// The retries the provider made.
    retries: u32,
}

/// The stream's next event, the wait for it added to `model_wait`.
async fn next_event(stream: &mut EventStream, model_wait: &mut Duration) -> Option<StreamEvent> {
    let waiting = Instant::now();
    let next = stream.next().await;
    *model_wait += waiting.elapsed();
    next
}

/// The sink's delta for a content event; `None` for the stream's start,
/// retries and end.
fn assistant_delta(ev: StreamEvent) -> Option<AssistantDelta> {
    match ev {
        StreamEvent::TextStart { index } => Some(AssistantDelta::TextStart {
            content_index: index,
        }),
        StreamEvent::TextDelta { index, delta } => Some(AssistantDelta::TextDelta {
            content_index: index,
            delta,
        }),
        StreamEvent::TextEnd { index, text } => Some(AssistantDelta::TextEnd {
            content_index: index,
            content: text,
        }),
        StreamEvent::ThinkingStart { index } => Some(AssistantDelta::ThinkingStart {
            content_index: index,
        }),
        StreamEvent::ThinkingDelta { index, delta } => Some(AssistantDelta::ThinkingDelta {
            content_index: index,
            delta,
        }),
        StreamEvent::ThinkingEnd {
            index, thinking, ..
        } => Some(AssistantDelta::ThinkingEnd {
            content_index: index,
            content: thinking,
        }),
        StreamEvent::ToolCallStart { index, .. } => Some(AssistantDelta::ToolCallStart {
            content_index: index,
        }),
        StreamEvent::ToolCallDelta { index, delta } => Some(AssistantDelta::ToolCallDelta {
            content_index: index,
            delta,
        }),
        StreamEvent::ToolCallEnd {
            index,
            id,
            name,
            arguments,
            arguments_error,
        } => {
            let mut tool_call = serde_json::json!({
                "type": "toolCall", "id": id, "name": name, "arguments": arguments
            });
            if let Some(e) = arguments_error {
                tool_call["argumentsError"] = Value::String(e);
            }
            Some(AssistantDelta::ToolCallEnd {
                content_index: index,
                tool_call,
            })
        }
        StreamEvent::Start | StreamEvent::Retry { .. } | StreamEvent::Done(_) => None,
    }
}

/// The block at `index` of a partial message, created by `make` if missing.
fn block_at(
    content: &mut Vec<ContentBlock>,
    index: usize,
    make: impl FnOnce() -> ContentBlock,
) -> &mut ContentBlock {
    if content.len() <= index {
        content.push(make());
    }
    let last = content.len() - 1;
    &mut content[index.min(last)]
}

/// Follow a stream event in the `partial` snapshot, as Pi's stream does:
/// blocks grow with their deltas, tool-call arguments are parsed as soon as
/// the streamed JSON is complete (kept as they were until then).
fn apply_to_partial(
    partial: &mut AssistantMessage,
    args: &mut Vec<(usize, String)>,
    ev: &StreamEvent,
) {
    let new_text = || ContentBlock::text("");
    let new_thinking = || {
        ContentBlock::Known(KnownBlock::Thinking {
            thinking: String::new(),
            extra: Default::default(),
        })
    };
    let content = &mut partial.content;
    match ev {
        StreamEvent::TextStart { index } => {
            block_at(content, *index, new_text);
        }
        StreamEvent::TextDelta { index, delta } => {
            if let ContentBlock::Known(KnownBlock::Text { text, .. }) =
                block_at(content, *index, new_text)
            {
                text.push_str(delta);
            }
        }
        StreamEvent::TextEnd { index, text: full } => {
            if let ContentBlock::Known(KnownBlock::Text { text, .. }) =
                block_at(content, *index, new_text)
            {
                text.clone_from(full);
            }
        }
        StreamEvent::ThinkingStart { index } => {
            block_at(content, *index, new_thinking);
        }
        StreamEvent::ThinkingDelta { index, delta } => {
            if let ContentBlock::Known(KnownBlock::Thinking { thinking, .. }) =
                block_at(content, *index, new_thinking)
            {
                thinking.push_str(delta);
            }
        }
        StreamEvent::ThinkingEnd {
            index,
            thinking: full,
            signature,
        } => {
            if let ContentBlock::Known(KnownBlock::Thinking { thinking, extra }) =
                block_at(content, *index, new_thinking)
            {
                thinking.clone_from(full);
                if let Some(sig) = signature {
                    extra.insert("thinkingSignature".into(), Value::from(sig.as_str()));
                }
            }
        }
        StreamEvent::ToolCallStart { index, id, name } => {
            block_at(content, *index, || {
                ContentBlock::Known(KnownBlock::ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: Value::Object(Default::default()),
                    extra: Default::default(),
                })
            });
            args.push((*index, String::new()));
        }
        StreamEvent::ToolCallDelta { index, delta } => {
            let Some((_, buf)) = args.iter_mut().find(|(i, _)| i == index) else {
                return;
            };
            buf.push_str(delta);
            if let Ok(parsed) = serde_json::from_str::<Value>(buf)
                && let Some(ContentBlock::Known(KnownBlock::ToolCall { arguments, .. })) =
                    content.get_mut(*index)
            {
                *arguments = parsed;
            }
        }
        StreamEvent::ToolCallEnd {
            index,
            id,
            name,
            arguments,
            arguments_error,
        } => {
            if let Some(ContentBlock::Known(KnownBlock::ToolCall {
                id: bid,
                name: bname,
                arguments: bargs,
                extra,
            })) = content.get_mut(*index)
            {
                bid.clone_from(id);
                bname.clone_from(name);
                bargs.clone_from(arguments);
                if let Some(e) = arguments_error {
                    extra.insert("argumentsError".into(), Value::String(e.clone()));
                }
            }
        }
        // A retried stream starts over: what the failed attempt streamed is dropped.
        StreamEvent::Retry { .. } => {
            content.clear();
            args.clear();
        }
        StreamEvent::Start | StreamEvent::Done(_) => {}
    }
}

/// Pi 1.6's `auto_retry_end` for a response the provider retried `retries` times: success
/// unless it failed too; a cancelled one ends as Pi ends a cancelled retry.
pub(super) fn retry_end(retries: u32, msg: &AssistantMessage) -> Option<Event> {
    if retries == 0 {
        return None;
    }
    let final_error = match msg.stop_reason.as_str() {
        "error" => Some(
            msg.error_message
                .clone()
                .unwrap_or_else(|| "Unknown error".to_owned()),
        ),
        "aborted" => Some("Retry cancelled".to_owned()),
        _ => None,
    };
    Some(Event::AutoRetryEnd {
        success: final_error.is_none(),
        attempt: retries,
        final_error,
    })
}
