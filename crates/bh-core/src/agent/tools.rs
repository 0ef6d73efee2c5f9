//! One tool call: the checkpoint before a mutating tool, the tool on a
//! blocking thread, its streamed output.

use super::*;

impl Agent {
    /// Checkpoint before a mutating tool call; a failure is a warning.
    pub(super) async fn checkpoint(
        &self,
        call_id: &str,
        name: &str,
        entry: &str,
        sink: &mut (dyn FnMut(Event) + Send),
    ) -> Option<String> {
        let store = self.checkpoints.clone()?;
        if !bh_tools::is_mutating(name) || !self.offers(name) {
            return None;
        }
        let request = SnapshotRequest {
            tool: name.to_owned(),
            session: Some(self.session_id.clone()),
            entry: Some(entry.to_owned()),
        };
        let outcome = tokio::task::spawn_blocking(move || store.snapshot(&request)).await;
        match outcome {
            Ok(Ok(o)) => {
                sink(Event::Checkpoint {
                    tool_call_id: call_id.to_owned(),
                    tool_name: name.to_owned(),
                    id: o.checkpoint.id.clone(),
                    created: o.created,
                });
                Some(o.checkpoint.id)
            }
            Ok(Err(e)) => {
                sink(Event::Warning {
                    message: format!("checkpoint before {name} ({call_id}) failed: {e}"),
                });
                None
            }
            Err(e) => {
                sink(Event::Warning {
                    message: format!("checkpoint before {name} ({call_id}) failed: {e}"),
                });
                None
            }
        }
    }

    /// After a mutating call that had a checkpoint `before`: the state it
    /// left, as a checkpoint (usually debounced into the next call's), and
    /// an after-record in the project's call journal tying both to the
    /// session, the entry and the call. Returns the after checkpoint's id;
    /// a failure is a warning.
    pub(super) async fn checkpoint_after(
        &self,
        call_id: &str,
        name: &str,
        entry: &str,
        before: &str,
        refs: Vec<bh_checkpoint::RefMove>,
        sink: &mut (dyn FnMut(Event) + Send),
    ) -> Option<String> {
        let store = self.checkpoints.clone()?;
        let request = SnapshotRequest {
            tool: name.to_owned(),
            session: Some(self.session_id.clone()),
            entry: Some(entry.to_owned()),
        };
        let record = bh_checkpoint::AfterCall {
            session: self.session_id.clone(),
            entry: entry.to_owned(),
            call: Some(call_id.to_owned()),
            tool: name.to_owned(),
            before: before.to_owned(),
            after: String::new(),
            transcript: None,
            refs,
        };
        let outcome = tokio::task::spawn_blocking(move || {
            let o = store.snapshot_after(&request)?;
            let record = bh_checkpoint::AfterCall {
                after: o.checkpoint.id.clone(),
                ..record
            };
            store.store().call_journal().append_after(&record)?;
            Ok::<_, bh_checkpoint::CheckpointError>(o.checkpoint.id)
        })
        .await;
        match outcome {
            Ok(Ok(id)) => Some(id),
            Ok(Err(e)) => {
                sink(Event::Warning {
                    message: format!("after-record of {name} ({call_id}) failed: {e}"),
                });
                None
            }
            Err(e) => {
                sink(Event::Warning {
                    message: format!("after-record of {name} ({call_id}) failed: {e}"),
                });
                None
            }
        }
    }

    pub(super) fn offers(&self, name: &str) -> bool {
        self.tools.iter().any(|s| s.name == name)
    }

    /// Run one tool on a blocking thread; `cancel` kills a running `bash`.
    /// Its partial results reach the sink as `tool_execution_update` events
    /// while it runs, all of them before this returns. The inner `Err`: the
    /// harness could not run it at all (it halts the run).
    pub(super) async fn execute(
        &self,
        id: &str,
        name: &str,
        args: &Value,
        cancel: &CancellationToken,
        sink: &mut (dyn FnMut(Event) + Send),
    ) -> Result<std::result::Result<ToolResult, bh_tools::HarnessFailure>> {
        if !self.offers(name) {
            return Ok(Ok(ToolResult::error(format!("Tool {name} not found"))));
        }
        // The tool watches the run's own token (one token type throughout).
        let tool_cancel = cancel.clone();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<ToolUpdate>();
        let toolbox = self.toolbox.clone();
        let tool = name.to_owned();
        let tool_args = args.clone();
        let mut running = tokio::task::spawn_blocking(move || {
            let send = move |u: ToolUpdate| {
                let _ = tx.send(u);
            };
            toolbox.call_with_updates(&tool, &tool_args, &tool_cancel, Some(&send))
        });
        let update = |u: ToolUpdate| Event::ToolExecutionUpdate {
            tool_call_id: id.to_owned(),
            tool_name: name.to_owned(),
            args: args.clone(),
            partial_result: partial_result(u),
        };
        let joined = loop {
            tokio::select! {
                biased;
                Some(u) = rx.recv() => sink(update(u)),
                joined = &mut running => break joined,
            }
        };
        // Updates sent just before the tool returned.
        while let Ok(u) = rx.try_recv() {
            sink(update(u));
        }
        joined.map_err(|e| CoreError::Task {
            what: "tool",
            message: e.to_string(),
        })
    }
}

/// A tool's partial result in the shape of `tool_execution_end`'s `result`.
fn partial_result(u: ToolUpdate) -> ToolExecutionResult {
    let as_result = ToolResult {
        content: u.content,
        details: u.details,
        is_error: false,
    };
    ToolExecutionResult {
        content: as_result.to_message("", "", 0).content,
        details: as_result.details,
    }
}

/// Record the checkpoint id in the result's `details.checkpoint` (and the
/// after-record's in `details.checkpointAfter`).
pub(super) fn attach_checkpoint(result: &mut ToolResult, id: &str, after: Option<&str>) {
    let put = |map: &mut serde_json::Map<String, Value>| {
        map.insert("checkpoint".into(), Value::from(id));
        if let Some(after) = after {
            map.insert("checkpointAfter".into(), Value::from(after));
        }
    };
    match &mut result.details {
        Some(Value::Object(map)) => put(map),
        Some(_) => {}
        None => {
            let mut map = serde_json::Map::new();
            put(&mut map);
            result.details = Some(Value::Object(map));
        }
    }
}

/// Pi 1.6's result for a tool call of a response cut by the output token limit.
pub(super) fn truncated_call_message(name: &str) -> String {
    format!(
        "Tool call \"{name}\" was not executed: the response hit the output token limit, \
         so its arguments may be truncated. Re-issue the tool call with complete arguments."
    )
}

/// The refs a `bash` call's git broker moved (`details.git.applied`), for
/// its after-record: a rewind moves them back.
pub(super) fn ref_moves(result: &ToolResult) -> Vec<bh_checkpoint::RefMove> {
    let applied = result
        .details
        .as_ref()
        .and_then(|d| d.pointer("/git/applied"))
        .and_then(Value::as_array);
    let text = |v: &Value| v.as_str().map(str::to_owned);
    applied
        .into_iter()
        .flatten()
        .filter_map(|a| {
            Some(bh_checkpoint::RefMove {
                name: text(a.get("ref")?)?,
                before: text(&a["before"]),
                after: text(&a["after"]),
            })
        })
        .collect()
}
